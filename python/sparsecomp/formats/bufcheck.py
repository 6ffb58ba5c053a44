"""Full validation of raw level buffers (``SparseTensor.from_buffers``).

Bad buffers must never reach native code, so every rule the packer follows
is checked, level by level, top-down:

* a level has a positions/coordinates buffer exactly when its format has one,
  1-D, of the signed dtype of the layout's ``pos_width``/``crd_width``;
* positions: length ``nparents + 1`` (``2 * nparents`` for loose_compressed),
  starting at 0 (loose: at least 0), non-decreasing, ending at the number of
  coordinates (loose: at most); ``dense_varied`` prefixes fit the level size;
* ``compressed_fixed``: ``nparents * W`` coordinates (``W`` static, or one
  run-time width); padding is -1 and only follows a parent's real entries;
* ``singleton``: one coordinate per parent; ``structured[n,m]``: ``n`` per parent;
* every reachable coordinate lies in ``[0, level size)``, strictly ascending
  within its parent (non-decreasing for nonunique levels; nonordered levels
  need only uniqueness); COO regions (singleton levels) must be sorted, and
  unique unless the last level is nonunique;
* values: 1-D, an allowed dtype, one per last-level position; stored entries
  that map outside the shape (partial blocks) hold zero and are padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.levels import Level
from sparsecomp.formats.ordering import duplicate_index, sort_entries
from sparsecomp.formats.storage import Storage, allows_duplicates, is_exact
from sparsecomp.formats.structured import structured_indices
from sparsecomp.formats.unpack import Step, compose_coords, expand_level, fixed_width
from sparsecomp.formats.validate import check_crd_widths, check_values, index_dtype


def check_buffers(
    layout: Layout,
    shape: tuple[int, ...],
    positions: Sequence[Any],
    coordinates: Sequence[Any],
    values: Any,
) -> Storage:
    """Validate raw buffers and return them as a :class:`Storage` of private copies."""
    lvl_shape = layout.dim_to_lvl.level_shape(shape)
    check_crd_widths(layout, lvl_shape)
    pos_bufs = _buffers(layout, positions, "positions")
    crd_bufs = _buffers(layout, coordinates, "coordinates")
    reach, npos = np.zeros(1, np.int64), 1
    steps: list[Step] = []
    for lvl, level in enumerate(layout.levels):
        pos, crd = pos_bufs[lvl], crd_bufs[lvl]
        if level.kind == "structured" and crd is not None:
            crd = _decode(layout, lvl_shape, crd)
        pos64 = None if pos is None else pos.astype(np.int64)
        crd64 = None if crd is None else crd.astype(np.int64)
        _check_lengths(lvl, level, lvl_shape[lvl], pos64, crd64, reach, npos)
        step = expand_level(level, lvl_shape[lvl], pos64, crd64, reach, npos)
        _check_children(lvl, level, lvl_shape[lvl], step)
        steps.append(step)
        reach, npos = step.reach, step.npos
    vals = np.array(check_values(values, npos, "values"))
    storage = Storage(tuple(pos_bufs), tuple(crd_bufs), vals)
    _check_entries(layout, shape, lvl_shape, compose_coords(steps), vals[reach])
    return storage


def _buffers(layout: Layout, bufs: Sequence[Any], what: str) -> list[np.ndarray | None]:
    if len(bufs) != layout.n_levels:
        raise FormatError(
            f"{what} must list one entry per level ({layout.n_levels}), got {len(bufs)}"
        )
    out: list[np.ndarray | None] = []
    for lvl, (level, buf) in enumerate(zip(layout.levels, bufs, strict=True)):
        wanted = level.has_positions if what == "positions" else level.has_coordinates
        if (buf is None) == wanted:
            need = "needs a" if wanted else "has no"
            raise FormatError(f"level {lvl} ({level}) {need} {what} buffer")
        out.append(None if buf is None else _copy(layout, lvl, level, buf, what))
    return out


def _copy(layout: Layout, lvl: int, level: Level, buf: Any, what: str) -> np.ndarray:
    arr = np.array(buf, copy=True)
    if arr.ndim != 1:
        raise FormatError(f"{what} of level {lvl} must be 1-D, got shape {arr.shape}")
    if (
        what == "coordinates"
        and layout.nm_metadata.startswith("mma_sp")
        and level.kind == "structured"
    ):
        if arr.dtype != np.uint32:
            raise FormatError(
                f"{layout.nm_metadata} metadata of level {lvl} must be uint32, got {arr.dtype}"
            )
        return arr
    width = layout.pos_width if what == "positions" else layout.crd_width
    key = "pos_width" if what == "positions" else "crd_width"
    if arr.dtype != index_dtype(width):
        raise FormatError(
            f"{what} of level {lvl} must be {index_dtype(width)} ({key} {width}), got {arr.dtype}"
        )
    return arr


def _decode(layout: Layout, lvl_shape: tuple[int, ...], buf: np.ndarray) -> np.ndarray:
    try:
        return structured_indices(layout, lvl_shape, buf)
    except FormatError:
        raise
    except Exception as exc:  # the metadata decoder rejected the buffer
        raise FormatError(f"invalid {layout.nm_metadata} metadata: {exc}") from exc


def _fail(lvl: int, level: Level, text: str) -> FormatError:
    return FormatError(f"level {lvl} ({level}): {text}")


def _check_lengths(
    lvl: int,
    level: Level,
    size: int,
    pos: np.ndarray | None,
    crd: np.ndarray | None,
    reach: np.ndarray,
    npos: int,
) -> None:
    """Structural checks that make :func:`expand_level` safe."""
    if pos is not None:
        _check_positions(lvl, level, size, pos, 0 if crd is None else crd.shape[0], npos)
    if crd is None:
        return
    ncrd = crd.shape[0]
    if level.kind == "singleton" and ncrd != npos:
        raise _fail(lvl, level, f"needs {npos} coordinates (one per parent), got {ncrd}")
    if level.kind == "structured" and ncrd != npos * level.n:
        raise _fail(
            lvl, level, f"needs {npos * level.n} coordinates ({level.n} per parent), got {ncrd}"
        )
    if level.kind == "compressed" and not level.varied:
        width = fixed_width(level, ncrd, npos)
        if ncrd != npos * width:
            raise _fail(lvl, level, f"needs {npos} x {width} coordinates, got {ncrd}")
        rows = crd.reshape(npos, width)[reach]
        if (rows < -1).any():
            raise _fail(lvl, level, f"coordinate {rows.min()} is out of range (padding is -1)")
        real = rows != -1
        if (real[:, 1:] & ~real[:, :-1]).any():
            p = int(reach[np.argmax((real[:, 1:] & ~real[:, :-1]).any(axis=1))])
            raise _fail(lvl, level, f"padding (-1) before a real entry in parent {p}")


def _check_positions(
    lvl: int, level: Level, size: int, pos: np.ndarray, ncrd: int, npos: int
) -> None:
    loose = level.kind == "loose_compressed"
    want = 2 * npos if loose else npos + 1
    if pos.shape[0] != want:
        raise _fail(lvl, level, f"needs {want} positions for {npos} parents, got {pos.shape[0]}")
    if pos.shape[0] == 0:
        return
    if loose and pos[0] < 0:
        raise _fail(lvl, level, f"positions must be non-negative, got {pos[0]}")
    if not loose and pos[0] != 0:
        raise _fail(lvl, level, f"positions must start at 0, got {pos[0]}")
    drops = np.flatnonzero(pos[1:] < pos[:-1])
    if drops.size:
        i = int(drops[0])
        raise _fail(lvl, level, f"positions decrease at index {i + 1} ({pos[i]} then {pos[i + 1]})")
    if level.kind == "dense":
        lens = pos[1:] - pos[:-1]
        if lens.size and lens.max() > size:
            p = int(np.argmax(lens))
            raise _fail(
                lvl, level, f"parent {p} stores {lens[p]} entries, more than the level size {size}"
            )
    elif pos[-1] != ncrd and not (loose and pos[-1] < ncrd):
        raise _fail(lvl, level, f"positions end at {pos[-1]} but there are {ncrd} coordinates")


def _check_children(lvl: int, level: Level, size: int, step: Step) -> None:
    """Coordinates in range and, within each parent, ascending (and unique)."""
    if level.kind == "dense":
        return
    crd, src = step.crd, step.src
    bad = np.flatnonzero((crd < 0) | (crd >= size))
    if bad.size:
        i = int(bad[0])
        raise _fail(
            lvl,
            level,
            f"coordinate {crd[i]} at position {step.reach[i]} is out of range for size {size}",
        )
    if level.kind == "singleton" or crd.shape[0] < 2:
        return
    same = src[1:] == src[:-1]
    if level.nonordered:
        order = np.lexsort((crd, src))
        s, c = src[order], crd[order]
        dup = (s[1:] == s[:-1]) & (c[1:] == c[:-1])
        if level.is_unique and dup.any():
            i = int(order[np.argmax(dup)])
            raise _fail(
                lvl,
                level,
                f"coordinate {crd[i]} repeats within a parent (position {step.reach[i]})",
            )
        return
    wrong = same & ((crd[1:] <= crd[:-1]) if level.is_unique else (crd[1:] < crd[:-1]))
    if wrong.any():
        i = int(np.argmax(wrong))
        how = "strictly increasing" if level.is_unique else "non-decreasing"
        raise _fail(
            lvl,
            level,
            f"coordinates are not {how} within a parent ({crd[i]} then {crd[i + 1]} "
            f"at positions {step.reach[i]} and {step.reach[i + 1]})",
        )


def _check_entries(
    layout: Layout,
    shape: tuple[int, ...],
    lvl_shape: tuple[int, ...],
    lvl: np.ndarray,
    vals: np.ndarray,
) -> None:
    """Whole-entry rules: COO regions sorted and unique; nothing nonzero outside the shape."""
    if any(lv.nonunique for lv in layout.levels) and lvl.shape[1] > 1:
        ordered = not any(lv.nonordered for lv in layout.levels)
        order, key = sort_entries(lvl, lvl_shape)
        if ordered and order is not None:
            raise FormatError("COO entries are not sorted lexicographically by level coordinates")
        if not allows_duplicates(layout):
            sorted_lvl = lvl if order is None else lvl[:, order]
            dup = duplicate_index(sorted_lvl, key)
            if dup is not None:
                tup = tuple(int(c) for c in sorted_lvl[:, dup])
                raise FormatError(f"duplicate entry at level coordinates {tup}")
    if layout.dim_to_lvl.is_permutation:
        return
    dims = layout.dim_to_lvl.to_dims(lvl)
    outside = ~np.all(dims < np.asarray(shape, np.int64)[:, None], axis=0)
    bad = outside if is_exact(layout) else outside & (vals != 0)
    if bad.any():
        i = int(np.argmax(bad))
        tup = tuple(int(c) for c in dims[:, i])
        raise FormatError(
            f"stored entry at {tup} with value {vals[i]} lies outside the shape {shape}"
        )
