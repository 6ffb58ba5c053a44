"""``structured[n,m]`` levels: n:m sparsity, and its packed ``mma.sp`` metadata.

Every parent position (an m-wide group) stores exactly ``n`` slots whose
coordinates (indices in ``[0, m)``) ascend. A group with fewer than ``n``
nonzeros pads its free slots with the smallest unused indices and value 0; a
group with more is not n:m and is a FormatError naming it.

With ``nm_metadata = "mma_sp_m16n8k16"`` or ``"mma_sp_m16n8k32"`` the
coordinates buffer holds the packed 2-bit metadata of PTX ``mma.sp``
(:mod:`sparsecomp.formats.mma_sp`) instead of one index per slot; that needs the
layout ``[dense_fixed, dense_fixed, structured[2,4]]`` (rows, groups, slots).
"""

from __future__ import annotations

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats import mma_sp
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.packing import LevelOut, PackState
from sparsecomp.formats.validate import check_storage_size


def pack_structured(state: PackState, lvl: int, parent: np.ndarray, nparents: int) -> LevelOut:
    """Pack the last, structured level (see :mod:`sparsecomp.formats.storage`)."""
    level = state.layout.levels[lvl]
    n, m = level.n, level.m
    crd = state.lvl[lvl]
    counts = np.bincount(parent, minlength=nparents)
    if counts.size and int(counts.max()) > n:
        p = int(np.argmax(counts > n))
        entry = int(np.searchsorted(parent, p))
        raise FormatError(_not_nm(state, lvl, entry, int(counts[p])))
    check_storage_size(lvl, nparents * n)
    occupied = np.zeros((nparents, m), dtype=bool)
    occupied[parent, crd] = True
    small = np.dtype(np.int16 if m < 2**15 else np.int64)
    free_rank: np.ndarray = np.cumsum(~occupied, axis=1, dtype=small)
    keep = occupied | (~occupied & (free_rank <= (n - counts)[:, None]))
    slots = np.nonzero(keep)[1]
    rank = (np.cumsum(keep, axis=1, dtype=small) - 1)[parent, crd]
    buf: np.ndarray = slots
    final = False
    if state.layout.nm_metadata.startswith("mma_sp"):
        rows, groups = mma_grid(state.layout, state.lvl_shape)
        indices = slots.reshape(rows, groups * n).astype(np.uint8)
        buf, final = _nm_call("to_mma_sp", state.layout, indices, rows, groups), True
    return LevelOut(None, buf, parent * n + rank, nparents * n, final)


def _not_nm(state: PackState, lvl: int, entry: int, count: int) -> str:
    level = state.layout.levels[lvl]
    dims = state.entry_dims(entry)
    d = state.layout.dim_to_lvl.results[lvl].dim
    lo = dims[d] // level.m * level.m
    hi = min(lo + level.m, state.shape[d]) - 1
    if len(dims) == 2:
        other = 1 - d
        where = f"{('row', 'column')[other]} {dims[other]}, {('rows', 'columns')[d]} {lo}..{hi}"
    else:
        where = "index (" + ", ".join(
            f"{lo}..{hi}" if i == d else str(c) for i, c in enumerate(dims)
        )
        where += ")"
    return f"not {level.n}:{level.m}: {where} hold {count} nonzeros"


def structured_indices(layout: Layout, lvl_shape: tuple[int, ...], buf: np.ndarray) -> np.ndarray:
    """The slot indices (int64, one per slot) that a structured coordinates buffer encodes."""
    if not layout.nm_metadata.startswith("mma_sp"):
        return buf.astype(np.int64)
    rows, groups = mma_grid(layout, lvl_shape)
    indices = _nm_call("from_mma_sp", layout, buf, rows, groups)
    return np.asarray(indices).astype(np.int64).reshape(-1)


def mma_grid(layout: Layout, lvl_shape: tuple[int, ...]) -> tuple[int, int]:
    """``(rows, groups)`` of an ``mma.sp`` layout; FormatError for other level lists."""
    names = [lv.name for lv in layout.levels]
    if names != ["dense_fixed", "dense_fixed", "structured"]:
        raise FormatError(
            f"nm_metadata '{layout.nm_metadata}' needs levels "
            f"[dense, dense, structured[2, 4]], got {[str(lv) for lv in layout.levels]}"
        )
    return lvl_shape[0], lvl_shape[1]


def _nm_call(name: str, layout: Layout, data: np.ndarray, rows: int, groups: int) -> np.ndarray:
    """Call ``sparsecomp.formats.mma_sp.<name>`` for the layout's mma.sp instruction shape."""
    shape = layout.nm_metadata.removeprefix("mma_sp_")
    return np.asarray(getattr(mma_sp, name)(data, rows, groups, shape))
