"""Unpacking level buffers back to COO entries.

The walk goes top-down: at each level it expands the reachable parent
positions into their children (see the table in
:mod:`sparsecomp.formats.storage`), skipping ELL padding (coordinate -1).
Positions that no parent reaches (gaps between ``loose_compressed`` ranges,
children of padding) are never read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparsecomp.formats.layout import Layout
from sparsecomp.formats.levels import Level
from sparsecomp.formats.storage import Storage, is_exact
from sparsecomp.formats.structured import structured_indices


@dataclass(frozen=True)
class Step:
    """One expanded level: per child its parent's index (``src``), coordinate and position."""

    src: np.ndarray
    crd: np.ndarray
    reach: np.ndarray
    npos: int  # all positions of the level, reachable or not


def fixed_width(level: Level, ncrd: int, nparents: int) -> int:
    """The slot count of a compressed_fixed level from its coordinates buffer length."""
    if level.width is not None:
        return level.width
    return ncrd // nparents if nparents else 0


def expand_level(
    level: Level,
    size: int,
    pos: np.ndarray | None,
    crd: np.ndarray | None,
    reach: np.ndarray,
    npos: int,
) -> Step:
    """Children of the reachable positions ``reach`` (of ``npos``) at one level.

    ``pos``/``crd`` are the level's buffers as int64 (structured levels:
    decoded slot indices); they must already be structurally valid.
    """
    if level.kind == "dense" and not level.varied:
        k = reach.shape[0]
        src = np.repeat(np.arange(k), size)
        c = np.tile(np.arange(size, dtype=np.int64), k)
        return Step(src, c, reach[src] * size + c, npos * size)
    if level.kind == "singleton":
        assert crd is not None
        return Step(np.arange(reach.shape[0]), crd[reach], reach, npos)
    if level.kind in ("compressed", "structured") and not level.varied:
        assert crd is not None
        width = level.n if level.kind == "structured" else fixed_width(level, crd.shape[0], npos)
        src = np.repeat(np.arange(reach.shape[0]), width)
        slots = (reach[:, None] * width + np.arange(width)).ravel()
        c = crd[slots]
        if level.kind == "compressed":
            real = c >= 0
            src, slots, c = src[real], slots[real], c[real]
        return Step(src, c, slots, npos * width)
    assert pos is not None
    if level.kind == "loose_compressed":
        lo, hi = pos[2 * reach], pos[2 * reach + 1]
    else:
        lo, hi = pos[reach], pos[reach + 1]
    src, off = segments(hi - lo)
    children = lo[src] + off
    if level.kind == "dense":  # dense_varied: coordinates are the offsets
        return Step(src, off, children, int(pos[npos]))
    assert crd is not None
    return Step(src, crd[children], children, crd.shape[0])


def segments(lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For segments of lengths ``lens``: per element its segment and its offset in it."""
    src = np.repeat(np.arange(lens.shape[0]), lens)
    starts = np.cumsum(lens) - lens
    return src, np.arange(src.shape[0], dtype=np.int64) - starts[src]


def level_buffers(
    layout: Layout, lvl_shape: tuple[int, ...], storage: Storage, lvl: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Level ``lvl``'s buffers as int64 (structured metadata decoded to slot indices)."""
    pos, crd = storage.positions[lvl], storage.coordinates[lvl]
    pos64 = None if pos is None else pos.astype(np.int64)
    if crd is None:
        return pos64, None
    if layout.levels[lvl].kind == "structured":
        return pos64, structured_indices(layout, lvl_shape, crd)
    return pos64, crd.astype(np.int64)


def walk(
    layout: Layout, lvl_shape: tuple[int, ...], storage: Storage
) -> tuple[np.ndarray, np.ndarray]:
    """``(level coordinates (n_levels, k), value positions (k,))`` of all reachable entries.

    Entries come in storage order (lexicographic for ordered layouts).
    """
    reach, npos = np.zeros(1, np.int64), 1
    steps = _compressed_rows(layout, lvl_shape, storage)
    if steps:
        reach, npos = steps[-1].reach, steps[-1].npos
    for lvl, level in enumerate(layout.levels):
        if lvl < len(steps):
            continue
        pos, crd = level_buffers(layout, lvl_shape, storage, lvl)
        step = expand_level(level, lvl_shape[lvl], pos, crd, reach, npos)
        steps.append(step)
        reach, npos = step.reach, step.npos
    return compose_coords(steps), reach


def _compressed_rows(layout: Layout, lvl_shape: tuple[int, ...], storage: Storage) -> list[Step]:
    """The first two steps of a ``dense_fixed, compressed_varied`` prefix (CSR), else none.

    Expanding the dense level first would make arrays of every row; here
    each stored entry finds its row by binary search in the positions, so
    the walk takes O(nnz) memory beyond the buffers however many rows
    there are.
    """
    levels = layout.levels
    if len(levels) < 2 or levels[0].name != "dense_fixed":
        return []
    if levels[1].kind != "compressed" or not levels[1].varied:
        return []
    pos, crd = storage.positions[1], storage.coordinates[1]
    if pos is None or crd is None:
        return []
    children = np.arange(int(pos[0]), int(pos[-1]), dtype=np.int64)
    # searched in the positions' own dtype: a mixed-dtype search copies them
    rows = np.searchsorted(pos, children.astype(pos.dtype), side="right").astype(np.int64) - 1
    k = children.shape[0]
    top = Step(np.zeros(k, np.int64), rows, rows, lvl_shape[0])
    return [top, Step(np.arange(k), crd[children].astype(np.int64), children, crd.shape[0])]


def compose_coords(steps: list[Step]) -> np.ndarray:
    """Level coordinates of the last level's children, following ``src`` links upward."""
    k = steps[-1].reach.shape[0]
    out = np.empty((len(steps), k), np.int64)
    idx: np.ndarray | None = None  # None: identity
    for lvl in range(len(steps) - 1, -1, -1):
        step = steps[lvl]
        out[lvl] = step.crd if idx is None else step.crd[idx]
        idx = step.src if idx is None else step.src[idx]
    return out


def unpack(
    layout: Layout, shape: tuple[int, ...], storage: Storage
) -> tuple[np.ndarray, np.ndarray]:
    """``(coords (ndim, nnz) int64, values)`` of the logical entries, in storage order.

    Padding outside ``shape`` (partial blocks) is dropped; layouts that are
    not exact (:func:`~sparsecomp.formats.storage.is_exact`) also drop zeros.
    """
    lvl_shape = layout.dim_to_lvl.level_shape(shape)
    lvl, vpos = walk(layout, lvl_shape, storage)
    dims = layout.dim_to_lvl.to_dims(lvl)
    vals = storage.values[vpos]
    keep = None if is_exact(layout) else vals != 0
    if not layout.dim_to_lvl.is_permutation:
        inside = np.all(dims < np.asarray(shape, np.int64)[:, None], axis=0)
        keep = inside if keep is None else keep & inside
    if keep is None or keep.all():
        return dims, vals
    return dims[:, keep], vals[keep]
