"""Compiled kernels over the partitions of a :class:`~.matrix.DistributedMatrix`.

``map(exe, "spmv", A, x)`` runs ``exe``'s function on every row partition of
``A`` on the workers and returns the result as a ``dask.array`` (a dense
row-wise result: SpMV, SpMM) or a :class:`~.matrix.DistributedMatrix` (a
sparse one: SDDMM). The executable goes to each worker once (a worker
plugin, :mod:`.ship`); each partition is packed in the function's layout
once, on its worker, and kept there (``exe.prepare``). A dense operand is either *split*
(its rows are the matrix's: SDDMM's ``X``), each partition getting its rows,
or *broadcast* (its rows are the matrix's columns: SpMV's ``x``, SpMM's
``B``), each worker getting it once per call. Which one is told from the
shapes, and for a square matrix from the op (the first dense operand of an
SDDMM is split); ``split=`` names the split operands where that is not right.

Where a partition boundary splits a row (power-law rows, :mod:`.partition`),
the partitions' results for that row are combined with ``combine``: ``"sum"``
(the default: right for kernels that sum over a row's entries, as SpMV and
SpMM do), ``"max"`` or ``"min"``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sparsecomp.dask import worker
from sparsecomp.dask.matrix import DistributedMatrix, client_of
from sparsecomp.dask.partition import owners
from sparsecomp.dask.ship import Payload, install
from sparsecomp.errors import SparsecompError

_LOCK = threading.Lock()
_PAYLOADS: dict[str, Payload] = {}
_SHIPPED: dict[tuple[str, str], str] = {}


def ship(exe: Any, client: Any = None) -> str:
    """Install ``exe`` on every worker of ``client``'s cluster, present and future
    (:func:`.ship.install`, once per client); its digest, which tasks pass."""
    client = client_of(client)
    with _LOCK:
        key = _identity(exe)
        payload = _PAYLOADS.get(key)
        if payload is None:
            payload = _PAYLOADS[key] = Payload.of(exe)
        shipped = (client.id, payload.digest)
        if shipped not in _SHIPPED:
            install(payload, client)
            _SHIPPED[shipped] = payload.digest
        return payload.digest


def _identity(exe: Any) -> str:
    """What tells ``exe``'s files from another's: its directory, and its library's and
    manifest's sizes and modification times (another kernel saved to the directory a
    first one was shipped from, then loaded, ran the first one on the workers)."""
    stats = []
    for name in (exe.manifest["library"], "manifest.json"):
        try:
            st = (exe.directory / name).stat()
        except OSError:
            return f"{exe.directory}:{id(exe)}"
        stats.append(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
    return f"{exe.directory}:{':'.join(stats)}"


def map(
    exe: Any,
    function: str,
    A: DistributedMatrix,
    *operands: Any,
    split: Sequence[int] | None = None,
    combine: str = "sum",
    layout: str | None = None,
    client: Any = None,
) -> Any:
    """``function(A, *operands)`` over ``A``'s partitions (see the module);
    ``split``: the positions (in ``operands``) of the dense operands split by rows.
    ``layout="auto"``: each partition in the layout chosen for it on its worker
    (:func:`sparsecomp.formats.choose` on the partition), the function compiled
    here for each layout chosen and installed on the workers; by default, the
    function's own layout."""
    import dask
    import dask.array as da

    if not isinstance(A, DistributedMatrix):
        raise SparsecompError(f"map's matrix is a DistributedMatrix, not {type(A).__name__}")
    client = client_of(client or A.client)  # by default, the cluster holding A
    if combine not in ("sum", "max", "min"):
        raise SparsecompError(f"combine is 'sum', 'max' or 'min', not {combine!r}")
    _check_executable(exe, function)
    signature = exe.functions[function].signature
    sparse = [i for i, a in enumerate(signature.args) if a.kind == "sparse"]
    if sparse != [0]:
        raise SparsecompError(
            f"map runs functions whose first argument is the one sparse matrix; "
            f"'{function}' takes {len(signature.args)} arguments, sparse at {sparse}"
        )
    if len(signature.args) != len(operands) + 1:
        raise SparsecompError(
            f"'{function}' takes {len(signature.args) - 1} operand(s) after the matrix, "
            f"and map got {len(operands)}: {signature.describe()}"
        )
    result = signature.results[0] if len(signature.results) == 1 else None
    if result is None:
        raise SparsecompError(
            f"map runs functions of one result; '{function}' has {len(signature.results)}"
        )
    _check_row_wise(function, signature, result)
    roles = _roles(A, signature, operands, split)
    packed, digests = _packed(A, exe, function, client, layout, _columns(operands, roles))
    broadcast = {i: _whole(op) for i, op in enumerate(operands) if roles[i] == "broadcast"}
    own = ship(exe, client)
    rest = _trailing(result.rank, operands, roles) if result.kind == "dense" else None
    said = ", ".join(
        f"{i + 1}: {'by rows' if r == 'split' else 'whole'}"
        for i, r in enumerate(roles)
        if r != "scalar"
    )  # operand numbers as the kernel's errors count them (argument 0: the matrix)
    calls = []
    for k, part in enumerate(A.parts):
        args = _arguments(operands, roles, broadcast, part.row_start, part.row_stop)
        shape = None if rest is None else (part.rows, *rest)
        call = dask.delayed(worker.call, pure=False)(
            digests[k], function, k, part, packed[k], *args, shape=shape, roles=said
        )
        shared = k > 0 and part.row_start < A.parts[k - 1].row_stop
        if shared and combine == "sum" and result.kind == "dense":
            # A row split between partitions: every part adds what the kernel adds to a
            # row without entries (y in y + A x, a bias), which the sum would count
            # once per part. The parts after the first subtract it: the kernel's row
            # for no entries (an affine kernel, as SpMV's and SpMM's are, is then exact).
            first = _arguments(operands, roles, broadcast, part.row_start, part.row_start + 1)
            empty = dask.delayed(worker.empty_row, pure=False)(
                own, function, k, part, A.shape[1], *first
            )  # the function in its own layout (a chosen one may not take one row: BSR)
            call = dask.delayed(worker.less_first_row, pure=False)(call, empty)
        calls.append(call)
    if result.kind == "sparse":
        return DistributedMatrix(
            A.shape, np.dtype(result.dtype), list(A.parts), calls, client=client, sources=[A]
        )
    assert rest is not None
    chunks = []
    keep = worker.Keep(A)  # the graph holds A: its partitions live as long as the result
    for lo, hi, js in owners(A.parts, A.shape[0]):
        blocks = [(A.parts[j].row_start, calls[j]) for j in js]
        value = dask.delayed(worker.assemble, pure=True)(lo, hi, blocks, combine, keep)
        chunks.append(da.from_delayed(value, shape=(hi - lo, *rest), dtype=result.dtype))
    return da.concatenate(chunks, axis=0)


def _packed(
    A: DistributedMatrix, exe: Any, function: str, client: Any, layout: str | None, columns: int
) -> tuple[list[Any], list[str]]:
    """``A``'s partitions packed for ``function`` on their workers (made once,
    persisted), and the digest of the executable each partition's calls run."""
    import dask

    from sparsecomp.runtime.prepared import infer_op

    digest = ship(exe, client)
    key = (digest, function, layout, columns if layout == "auto" else 0)
    if key in A.packed:
        return A.packed[key]
    if layout is not None and exe.recompile is None:
        raise SparsecompError(
            f"layout={layout!r} compiles the function for the layouts the partitions take; "
            f"this executable was loaded from {exe.directory} and cannot",
            hint="compile it with sparsecomp.compile(source)",
        )
    if layout == "auto":
        op = infer_op(exe.functions[function].signature)[0]
        choose = [dask.delayed(worker.choose_layout, pure=True)(p, op, columns) for p in A.pieces]
        chosen = client.compute(choose, sync=True)
        variants = {name: _variant(exe, function, name, client) for name in set(chosen)}
        names: list[str | None] = list(chosen)
        digests = [variants[n] for n in chosen]
    else:  # one layout for all: the function compiled for it here, as for "auto"
        names = [layout] * A.npartitions
        chosen_digest = digest if layout is None else _variant(exe, function, layout, client)
        digests = [chosen_digest] * A.npartitions
    tasks = [
        dask.delayed(worker.prepare, pure=True)(d, function, k, part, piece, name)
        for k, (part, piece, d, name) in enumerate(
            zip(A.parts, A.pieces, digests, names, strict=True)
        )
    ]
    A.packed[key] = (list(client.persist(tasks)), digests)
    A.layouts[function] = [n or "own" for n in names]
    return A.packed[key]


def _variant(exe: Any, function: str, layout: str, client: Any) -> str:
    """``function`` compiled with its matrix in ``layout`` (here), installed on the workers."""
    from sparsecomp.formats.names import parse_layout

    own = exe.functions[function].signature.args[0].layout
    attr = parse_layout(layout).attr_text()
    if own is not None and own.attr_text() == attr:
        return ship(exe, client)
    return ship(exe.recompile(function, {0: attr}), client)


def _columns(operands: tuple[Any, ...], roles: list[str]) -> int:
    """The dense columns a layout is chosen for: a broadcast matrix operand's (SpMM), else 1."""
    for value, role in zip(operands, roles, strict=True):
        if role == "broadcast" and np.ndim(value) == 2:
            return int(value.shape[1])
    return 1


def _roles(
    A: DistributedMatrix, signature: Any, operands: tuple[Any, ...], split: Sequence[int] | None
) -> list[str]:
    """Each operand: ``split`` (by rows), ``broadcast`` (whole) or ``scalar``: as
    ``split`` says; else as the function's signature says, where the operand's first
    size is the matrix's row or column size symbol (``y`` of ``y + A x``: A's rows);
    else from the shapes (for a square matrix, the op: SDDMM's first dense operand is
    split)."""
    from sparsecomp.runtime.prepared import infer_op

    rows, cols = A.shape
    wrong = [i for i in split or () if not 0 <= i < len(operands)]
    if wrong:
        raise SparsecompError(
            f"split names position(s) {wrong}; the function takes {len(operands)} operand(s) "
            f"after the matrix, at positions 0 to {len(operands) - 1}"
        )
    own = [*signature.args[0].shape, None, None][:2]
    row_size, col_size = (s if isinstance(s, str) else None for s in own)
    roles = []
    first_dense = True
    for i, (spec, value) in enumerate(zip(signature.args[1:], operands, strict=True)):
        if spec.kind != "dense" or spec.rank == 0:
            roles.append("scalar")
            continue
        if not hasattr(value, "shape") or np.ndim(value) != spec.rank:
            array = hasattr(value, "shape")
            what = f"of rank {np.ndim(value)}" if array else f"a {type(value).__name__}"
            raise SparsecompError(
                f"operand {i + 1} is {what}; the function takes a rank-{spec.rank} array there",
                hint=None if array else "pass numpy or dask arrays (np.asarray(...))",
            )
        lead = value.shape[0]
        if isinstance(lead, float) and lead != lead:  # NaN: dask's unknown chunk sizes
            raise SparsecompError(
                f"operand {i + 1} is a dask array whose sizes are unknown (after boolean "
                "indexing or a filter); map needs its rows to split it",
                hint="call x.compute_chunk_sizes() first",
            )
        size = spec.shape[0] if isinstance(spec.shape[0], str) else None
        if split is not None:
            role = "split" if i in split else "broadcast"
        elif size is not None and size == row_size != col_size:
            role = _checked("split", i, lead, rows, A.shape)
        elif size is not None and size == col_size != row_size:
            role = _checked("broadcast", i, lead, cols, A.shape)
        elif lead == rows and lead != cols:
            role = "split"
        elif lead == cols and lead != rows:
            role = "broadcast"
        elif lead == rows == cols:
            op = infer_op(signature)[0]
            role = "split" if op == "sddmm" and first_dense else "broadcast"
        else:
            raise SparsecompError(
                f"operand {i + 1} has {lead} rows; the matrix is {rows}x{cols}",
                hint="a dense operand has as many rows as the matrix (split) "
                "or as it has columns (broadcast); split=[...] names the split ones",
            )
        first_dense = False
        roles.append(role)
    return roles


def _check_executable(exe: Any, function: str) -> None:
    """A refusal of what is no executable (a ``@kernel``, one of its functions) before
    anything is sent to the cluster."""
    if hasattr(exe, "definition") and hasattr(exe, "compile"):  # a script kernel
        raise SparsecompError(
            "map takes a compiled executable, not a @kernel",
            hint=f"compile it first: sd.map({exe.__name__}.compile('host'), "
            f"'{exe.__name__}', ...)",
        )
    functions = getattr(exe, "functions", None)
    if not isinstance(functions, Mapping):
        hint = None
        if hasattr(exe, "signature"):  # exe.functions["name"]
            hint = f"pass the executable and the name: sd.map(exe, '{exe.signature.name}', ...)"
        raise SparsecompError(
            f"map takes an executable (sparsecomp.compile), not {type(exe).__name__}", hint=hint
        )


def _check_row_wise(function: str, signature: Any, result: Any) -> None:
    """A located refusal where ``function``'s result is not a row per matrix row, as its
    signature says: a 0-d result, or one whose first size is the matrix's column symbol
    (``A^T x`` on a matrix split in two parts of as many rows as it has columns gave the
    two parts' results stacked)."""
    rows, cols = ([*signature.args[0].shape, None, None])[:2]
    first = result.shape[0] if result.rank else None
    if result.rank == 0 or (isinstance(first, str) and first != rows):
        what = (
            "a scalar"
            if result.rank == 0
            else f"as many rows as the matrix's columns ({first})"
            if first == cols
            else f"as many rows as size {first}, not the matrix's rows"
        )
        raise SparsecompError(
            f"map runs row-wise functions, whose result has a row per matrix row; "
            f"'{function}' returns {what}",
            hint="a reduction over all rows runs on the whole matrix (A.to_scipy()), or "
            "split its operands yourself",
        )


def _checked(role: str, i: int, lead: int, want: int, shape: tuple[int, int]) -> str:
    """``role``, where operand ``i``'s ``lead`` rows are the ``want`` its signature says."""
    if lead != want:
        what = "rows" if role == "split" else "columns"
        raise SparsecompError(
            f"operand {i + 1} has {lead} rows; the function takes as many as the matrix's "
            f"{what} ({want}: the matrix is {shape[0]}x{shape[1]})"
        )
    return role


def _whole(value: Any) -> Any:
    """A broadcast operand as one task (numpy: in the graph, so that Dask can send it
    again to a worker that replaces a lost one, under a random key: hashing a
    large vector each call cost more than the rest of building the graph); each
    worker fetches it once."""
    import dask

    if hasattr(value, "dask") and hasattr(value, "rechunk"):
        return value.rechunk(value.shape).to_delayed().reshape(-1)[0]
    return dask.delayed(np.ascontiguousarray(value), pure=False)


def _arguments(
    operands: tuple[Any, ...], roles: list[str], broadcast: dict[int, Any], start: int, stop: int
) -> list[Any]:
    """The operands of a call on rows ``[start, stop)``: split ones cut to those rows."""
    return [
        broadcast[i] if roles[i] == "broadcast"
        else _rows(op, start, stop) if roles[i] == "split"
        else op
        for i, op in enumerate(operands)
    ]  # fmt: skip


def _rows(value: Any, start: int, stop: int) -> Any:
    import dask

    if hasattr(value, "dask") and hasattr(value, "rechunk"):
        block = value[start:stop]
        return block.rechunk(block.shape).to_delayed().reshape(-1)[0]
    return dask.delayed(np.ascontiguousarray(value[start:stop]), pure=False)


def _trailing(rank: int, operands: tuple[Any, ...], roles: list[str]) -> tuple[int, ...]:
    """The trailing sizes of a row-wise dense result of ``rank``."""
    if rank == 1:
        return ()
    for value, role in zip(operands, roles, strict=True):
        if role != "scalar" and np.ndim(value) == rank:
            return tuple(value.shape[1:])
    raise SparsecompError(f"map cannot tell the columns of a rank-{rank} result")
