"""What runs on the workers: a partition packed, a kernel called on it, results put together.

These are plain functions of picklable arguments, so that Dask ships them by
reference; each finds the executable its worker loaded (:func:`.ship.executable`)
and never imports MLIR.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsecomp.dask.partition import Part
from sparsecomp.dask.ship import executable
from sparsecomp.errors import SparsecompError


def piece(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> Any:
    """A partition's rows as a scipy CSR matrix."""
    import scipy.sparse as sp  # type: ignore[import-untyped]

    return sp.csr_matrix((data, indices, indptr), shape=shape)


def read_piece(path: str) -> Any:
    """A partition read from a file: scipy's ``.npz`` or Matrix Market (``.mtx``)."""
    import scipy.io  # type: ignore[import-untyped]
    import scipy.sparse as sp

    if path.endswith(".npz"):
        return sp.load_npz(path).tocsr()
    return sp.csr_matrix(scipy.io.mmread(path))


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
        raise SparsecompError(f"{_where(index, part)}: {e.message}", hint=e.hint) from None


def call(digest: str, function: str, index: int, part: Part, *args: Any) -> Any:
    """``function(*args)`` on one partition; a sparse result comes back as scipy CSR."""
    exe = executable(digest)
    try:
        out = exe.functions[function](*args)
    except SparsecompError as e:
        raise SparsecompError(f"{_where(index, part)}: {e.message}", hint=e.hint) from None
    return out.to_scipy().tocsr() if hasattr(out, "to_scipy") else out


def assemble(start: int, stop: int, blocks: list[tuple[int, Any]], combine: str = "sum") -> Any:
    """Rows ``[start, stop)`` of a row-wise result from the partitions' blocks
    (``(first row, block)``), ``combine``-d (sum, max, min) where a split row has several."""
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
