"""Packing COO entries into level buffers (MLIR's sparse tensor storage scheme).

A layout stores a tensor level by level. Every stored entry has a *position*
at each level; a level's buffers say which coordinates the positions below
each parent position hold (``size`` is the level size):

=================== ========================== ========================================
level               buffers                    children of parent position ``p``
=================== ========================== ========================================
dense_fixed         none                       ``p * size + c`` for every ``c < size``
dense_varied        pos (nparents + 1)         ``pos[p] + c``, ``c < pos[p+1] - pos[p]``
compressed_varied   pos (nparents + 1), crd    ``pos[p] .. pos[p+1] - 1``
loose_compressed    pos (2 * nparents), crd    ``pos[2p] .. pos[2p+1] - 1``
compressed_fixed    crd (nparents * W)         ``p * W + s``, ``s < W``; padding crd -1
singleton           crd (nparents)             ``p`` itself
structured[n,m]     crd (nparents * n)         ``p * n + s``, ``s < n``, crd ascending
=================== ========================== ========================================

The values buffer holds one value per position of the last level; positions
that no entry fills (dense fill, ELL and n:m padding) hold zero. A
``dense_varied`` parent stores the prefix ``0 .. 1 + max coordinate``; an ELL
with a run-time width uses the largest row count (0 with no entries);
n:m groups pad their free slots with the smallest unused indices.

Packing is vectorized: entries are sorted by level coordinates (skipped when
already sorted) and each level maps every entry's parent position to its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.ordering import check_no_duplicates, sort_entries
from sparsecomp.formats.packing import LevelOut, PackState
from sparsecomp.formats.structured import pack_structured
from sparsecomp.formats.validate import (
    check_crd_widths,
    check_pos_fits,
    check_storage_size,
    index_dtype,
)


@dataclass(frozen=True)
class Storage:
    """The buffers of one single-layout tensor: per level positions/coordinates, and values."""

    positions: tuple[np.ndarray | None, ...]
    coordinates: tuple[np.ndarray | None, ...]
    values: np.ndarray


def allows_duplicates(layout: Layout) -> bool:
    """Whether the layout can store equal coordinates twice (a nonunique last level)."""
    last = layout.levels[-1]
    return last.nonunique and last.kind in ("compressed", "loose_compressed", "singleton")


def is_exact(layout: Layout) -> bool:
    """Whether stored entries are exactly the given ones (explicit zeros survive).

    True when, below a prefix of ``dense_fixed`` levels, every level is
    compressed, ELL, loose_compressed or singleton: such layouts store no
    fill, and ELL padding is marked by coordinate -1.
    """
    levels = layout.levels
    i = 0
    while i < len(levels) and levels[i].name == "dense_fixed":
        i += 1
    sparse = ("compressed", "loose_compressed", "singleton")
    return i < len(levels) and all(lv.kind in sparse for lv in levels[i:])


def pack(layout: Layout, shape: tuple[int, ...], coords: np.ndarray, values: np.ndarray) -> Storage:
    """Pack validated entries (int64 ``coords`` ``(ndim, nnz)``, 1-D ``values``) into buffers.

    Input order does not matter. Duplicate coordinates are a FormatError
    unless the layout's last level is nonunique (then each is stored).
    Layouts that are not exact (:func:`is_exact`) skip zero values: they
    cannot tell them from fill, and an explicit zero must not make a group
    look more than n:m full or a block appear. ``values`` is never modified
    or shared.
    """
    lvl_shape = layout.dim_to_lvl.level_shape(shape)
    check_crd_widths(layout, lvl_shape)
    lvl = layout.dim_to_lvl.to_levels(coords).astype(np.int64, copy=False)
    order, key = sort_entries(lvl, lvl_shape)
    if order is not None:
        lvl, values = lvl[:, order], values[order]
    if not allows_duplicates(layout):
        check_no_duplicates(coords, lvl, order, key)
    copied = order is not None
    if not is_exact(layout):
        nonzero = values != 0
        if not nonzero.all():
            lvl, values, copied = lvl[:, nonzero], values[nonzero], True
    return _walk(PackState(layout, shape, lvl_shape, lvl), values, copied)


def _walk(state: PackState, values: np.ndarray, copied: bool) -> Storage:
    layout = state.layout
    nnz = state.lvl.shape[1]
    parent, nparents = np.zeros(nnz, np.int64), 1
    positions: list[np.ndarray | None] = []
    coordinates: list[np.ndarray | None] = []
    pdt, cdt = index_dtype(layout.pos_width), index_dtype(layout.crd_width)
    for lvl, level in enumerate(layout.levels):
        out = _packer(level.kind, level.varied)(state, lvl, parent, nparents)
        if out.pos is not None:
            check_pos_fits(layout, lvl, out.nparents)
        positions.append(None if out.pos is None else out.pos.astype(pdt))
        crd = out.crd if out.crd is None or out.final else out.crd.astype(cdt)
        coordinates.append(crd)
        parent, nparents = out.parent, out.nparents
    if nparents == nnz:  # every position holds an entry, in order
        vals = values if copied else values.copy()
    else:
        vals = np.zeros(nparents, values.dtype)
        vals[parent] = values
    return Storage(tuple(positions), tuple(coordinates), vals)


Packer = Callable[[PackState, int, np.ndarray, int], LevelOut]


def _packer(kind: str, varied: bool) -> Packer:

    if kind == "dense":
        return _pack_dense_varied if varied else _pack_dense_fixed
    if kind == "compressed":
        return _pack_compressed if varied else _pack_fixed
    packers: dict[str, Packer] = {
        "loose_compressed": _pack_compressed,
        "singleton": _pack_singleton,
        "structured": pack_structured,
    }
    return packers[kind]


def _pack_dense_fixed(state: PackState, lvl: int, parent: np.ndarray, nparents: int) -> LevelOut:
    size = state.lvl_shape[lvl]
    check_storage_size(lvl, nparents * size)
    return LevelOut(None, None, parent * size + state.lvl[lvl], nparents * size)


def _pack_dense_varied(state: PackState, lvl: int, parent: np.ndarray, nparents: int) -> LevelOut:
    crd = state.lvl[lvl]
    lens = np.zeros(nparents, np.int64)
    if crd.size:
        last = np.flatnonzero(np.append(parent[1:] != parent[:-1], True))
        lens[parent[last]] = crd[last] + 1
    ptr = _offsets(lens)
    return LevelOut(ptr, None, ptr[parent] + crd, int(ptr[-1]))


def _pack_compressed(state: PackState, lvl: int, parent: np.ndarray, nparents: int) -> LevelOut:
    level = state.layout.levels[lvl]
    crd = state.lvl[lvl]
    gid, first = distinct(parent, crd, _merges(state, lvl))
    ptr = _offsets(np.bincount(parent[first], minlength=nparents))
    pos = np.stack([ptr[:-1], ptr[1:]], axis=1).ravel() if level.kind == "loose_compressed" else ptr
    return LevelOut(pos, crd[first], gid, first.shape[0])


def _pack_fixed(state: PackState, lvl: int, parent: np.ndarray, nparents: int) -> LevelOut:
    level = state.layout.levels[lvl]
    crd = state.lvl[lvl]
    gid, first = distinct(parent, crd, _merges(state, lvl))
    gparent = parent[first]
    counts = np.bincount(gparent, minlength=nparents)
    most = int(counts.max()) if counts.size else 0
    width = most if level.width is None else level.width
    if most > width:
        p = int(np.argmax(counts > width))
        where = state.describe_parent(lvl, int(first[np.searchsorted(gparent, p)]))
        raise FormatError(
            f"{where} holds {int(counts[p])} entries, more than the {width} slots of "
            f"level {lvl} ({level})"
        )
    check_storage_size(lvl, nparents * width)
    rank = np.arange(first.shape[0]) - (np.cumsum(counts) - counts)[gparent]
    slot = gparent * width + rank
    buf = np.full(nparents * width, -1, np.int64)
    buf[slot] = crd[first]
    return LevelOut(None, buf, slot[gid], nparents * width)


def _pack_singleton(state: PackState, lvl: int, parent: np.ndarray, nparents: int) -> LevelOut:
    crd = state.lvl[lvl]
    if crd.shape[0] == nparents:  # one entry per parent position, in order
        return LevelOut(None, crd, parent, nparents)
    buf = np.zeros(nparents, np.int64)
    buf[parent] = crd
    return LevelOut(None, buf, parent, nparents)


def _merges(state: PackState, lvl: int) -> bool:
    """Whether entries can share a position at compressed level ``lvl``.

    Only unique levels merge, and at the last level of a unique layout every
    (already deduplicated) entry is distinct.
    """
    last = lvl == state.layout.n_levels - 1
    return state.layout.levels[lvl].is_unique and not last


def distinct(parent: np.ndarray, crd: np.ndarray, unique: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per sorted entry its stored position at a compressed level; per position its first entry.

    Unique levels merge entries with equal ``(parent, crd)``; nonunique
    levels give every entry its own position.
    """
    n = crd.shape[0]
    if not unique or n == 0:
        idx = np.arange(n, dtype=np.int64)
        return idx, idx
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(parent[1:], parent[:-1], out=new[1:])
    new[1:] |= crd[1:] != crd[:-1]
    return np.cumsum(new, dtype=np.int64) - 1, np.flatnonzero(new)


def _offsets(counts: np.ndarray) -> np.ndarray:
    ptr = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr
