"""What runs on the workers: a partition packed, a kernel called on it, results put together.

These are plain functions of picklable arguments, so that Dask ships them by
reference; each finds the executable its worker loaded (:func:`.ship.executable`)
and never imports MLIR.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from sparsecomp.dask.partition import Part
from sparsecomp.dask.ship import executable
from sparsecomp.errors import SparsecompError


def piece(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> Any:
    """A partition's rows as a scipy CSR matrix."""
    import scipy.sparse as sp  # type: ignore[import-untyped]

    return sp.csr_matrix((data, indices, indptr), shape=shape)


def read_piece(path: str, dtype: str | None = None, stamp: Any = None) -> Any:
    """A partition read from a file: scipy's ``.npz`` or Matrix Market (``.mtx``),
    its values as ``dtype`` where given. ``stamp`` (the file's modification time and
    size as the client saw them) only keys the task."""
    import scipy.io  # type: ignore[import-untyped]
    import scipy.sparse as sp

    read = (
        sp.load_npz(path).tocsr() if path.endswith(".npz") else sp.csr_matrix(scipy.io.mmread(path))
    )
    return read if dtype is None or read.dtype == np.dtype(dtype) else read.astype(dtype)


def describe(part: Any) -> tuple[tuple[int, int], int, str]:
    """A partition's shape, stored entries and dtype (read where it lives)."""
    return tuple(part.shape), int(part.nnz), str(part.dtype)


def _where(index: int, part: Part) -> str:
    return f"partition {index} (rows {part.row_start}:{part.row_stop})"


def choose_layout(piece: Any, op: str, k: int) -> str:
    """The layout :func:`sparsecomp.formats.choose` predicts fastest for ``op`` on
    this partition (its statistics only: no MLIR, no compile)."""
    from sparsecomp.formats import choose

    return choose(piece, op=op, k=k).layout


def prepare(
    digest: str, function: str, index: int, part: Part, piece: Any, layout: str | None = None
) -> Any:
    """The partition as ``function``'s sparse operand, packed once in ``layout``
    (the function's own by default; ``exe.prepare``): a
    :class:`~sparsecomp.formats.SparseTensor`, which Dask can move and copy (the
    ``Prepared`` around it holds the loaded library)."""
    exe = executable(digest)
    try:
        return exe.prepare(piece, layout, function=function).tensor
    except SparsecompError as e:
        message = _matrix_rows(e.message, part)
        raise SparsecompError(f"{_where(index, part)}: {message}", hint=e.hint) from None


def _matrix_rows(message: str, part: Part) -> str:
    """``message`` about the partition's own matrix with each ``row N`` it names
    counted in the whole matrix (a layout's check said "row 50" for row 150)."""
    return re.sub(r"\brow (\d+)", lambda m: f"row {int(m.group(1)) + part.row_start}", message)


def call(
    digest: str,
    function: str,
    index: int,
    part: Part,
    *args: Any,
    shape: Any = None,
    roles: str = "",
) -> Any:
    """``function(*args)`` on one partition; a sparse result comes back as scipy CSR.
    ``shape``: what a dense result must be (a row per partition row, then the sizes
    ``map`` told its ``dask.array`` from the operands); ``roles``: how ``map`` gave the
    operands (split by rows or whole), said with a size error."""
    exe = executable(digest)
    try:
        out = exe.functions[function](*args)
    except SparsecompError as e:
        hint = e.hint
        if roles and "size" in e.message:
            said = f"map gave the operands {roles}; split=[...] names the ones split by rows"
            hint = f"{hint}; {said}" if hint else said
        raise SparsecompError(f"{_where(index, part)}: {e.message}", hint=hint) from None
    if shape is not None and tuple(np.shape(out)) != tuple(shape):
        raise SparsecompError(
            f"{_where(index, part)}: '{function}' returned shape {tuple(np.shape(out))}, "
            f"not {tuple(shape)}: map runs row-wise functions, whose result has a row per "
            "matrix row and its other sizes from an operand's (SpMV's y, SpMM's C: B's "
            "columns)",
            hint="a reduction over the rows (column sums) or a result shaped otherwise "
            "does not split by rows: run it on the whole matrix (D.to_scipy())",
        )
    return out.to_scipy().tocsr() if hasattr(out, "to_scipy") else out


def empty_row(digest: str, function: str, index: int, part: Part, columns: int, *args: Any) -> Any:
    """``function``'s result for one row without entries (the row's operands ``args``):
    what the kernel adds to every row whatever its entries."""
    import scipy.sparse as sp

    exe = executable(digest)
    fn = exe.functions[function]
    empty = sp.csr_matrix((1, columns), dtype=np.dtype(fn.signature.args[0].dtype))
    try:
        return np.asarray(fn(empty, *args))
    except SparsecompError as e:
        raise SparsecompError(f"{_where(index, part)}: {e.message}", hint=e.hint) from None


def less_first_row(block: Any, empty: Any) -> Any:
    """``block`` with ``empty``'s row subtracted from its first row."""
    out = np.array(block)
    out[0] -= np.asarray(empty)[0]
    return out


class Keep:
    """Holds an object (a :class:`~.matrix.DistributedMatrix`) alive for as long as a
    task graph holding this does, and travels as nothing: a ``map`` result's graph
    names the matrix's persisted partitions by their keys only, so that, the matrix
    gone (built in a helper, or inline in the call), its futures were released and
    the result's ``compute`` failed with "lost dependencies"."""

    def __init__(self, held: Any) -> None:
        self.held = held

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_nothing, ())

    def __dask_tokenize__(self) -> tuple[str, int]:
        return ("sparsecomp.dask.worker.Keep", id(self.held))


def _nothing() -> None:
    return None


def assemble(
    start: int, stop: int, blocks: list[tuple[int, Any]], combine: str = "sum", keep: Any = None
) -> Any:
    """Rows ``[start, stop)`` of a row-wise result from the partitions' blocks
    (``(first row, block)``), ``combine``-d (sum, max, min) where a split row has several
    (``keep``: a :class:`Keep`, ignored here)."""
    first, block = blocks[-1]
    block = np.asarray(block)
    if len(blocks) == 1 and first == start and block.shape[0] == stop - start:
        return block
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum}[combine]
    out: np.ndarray | None = None
    for first, block in blocks:
        block = np.asarray(block)
        lo, hi = max(first, start), min(first + block.shape[0], stop)
        if out is None:
            out = np.zeros((stop - start, *block.shape[1:]), dtype=block.dtype)
            seen = np.zeros(stop - start, bool)
        if lo < hi:
            here, there = slice(lo - start, hi - start), block[lo - first : hi - first]
            fresh = ~seen[here]
            view = out[here]
            view[fresh] = there[fresh]
            view[~fresh] = ufunc(view[~fresh], there[~fresh])
            seen[here] = True
    assert out is not None
    return out
