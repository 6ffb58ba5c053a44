"""Catch index buffers of sparse results that overflowed their width.

A kernel computes a sparse result's sizes in ``index`` (64-bit) arithmetic
and stores positions and coordinates in the layout's ``pos_width`` /
``crd_width`` integers; a narrow width can wrap silently (an int16 position
past 32767). Buffer lengths are exact, so a wrapped positions buffer
always shows: its last position differs from the length of the level's
coordinates (a position is the true count modulo ``2**width``), or it
decreases. A ``loose_compressed`` level's (lo, hi) pairs need not cover
its coordinates, but a wrapped one leaves a pair out of ``[0, length]`` or
with lo > hi, and a level with more entries than its width addresses has
wrapped whatever the pairs say. Coordinates cannot wrap when every level's size fits
``crd_width``. Both checks cost O(positions) and run on every sparse result
whose widths are below 64 bits, before the result is returned; a compressed
level's positions are checked at any width, for a program that inserted
into a sparse tensor out of lexicographic order (upstream's codegen does not
check that) builds positions that fall.
"""

from __future__ import annotations

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.formats.validate import index_max


def check_result(tensor: SparseTensor, where: str) -> None:
    """Raise :class:`SparsecompError` if ``tensor``'s narrow index buffers overflowed."""
    if not isinstance(tensor.layout, Layout):
        for n, part in enumerate(tensor.parts):
            check_result(part, f"{where}, part {n}")
        return
    layout = tensor.layout
    narrow = layout.pos_width not in (0, 64)
    for lvl, (level, pos, crd) in enumerate(
        zip(layout.levels, tensor.positions, tensor.coordinates, strict=True)
    ):
        if pos is None or crd is None:
            continue
        if level.kind == "compressed":  # any width: an out-of-order insertion shows too
            _check_positions(layout, lvl, pos, crd.shape[0], where)
        elif level.kind == "loose_compressed" and narrow:
            _check_pairs(layout, lvl, pos, crd.shape[0], where)
    if layout.crd_width not in (0, 64):
        sizes = layout.dim_to_lvl.level_shape(tensor.shape)
        limit = index_max(layout.crd_width)
        for lvl, (level, size) in enumerate(zip(layout.levels, sizes, strict=True)):
            if level.has_coordinates and size > limit:
                raise SparsecompError(
                    f"{where}: level {lvl} ({level}) has size {size}, which does not fit the "
                    f"result's {layout.crd_width}-bit coordinates (at most {limit})",
                    hint="declare the result layout with a wider crd_width (32 or 64)",
                )


def _check_positions(layout: Layout, lvl: int, pos: np.ndarray, count: int, where: str) -> None:
    if pos.shape[0] == 0:
        return
    ok = int(pos[0]) == 0 and int(pos[-1]) == count and bool((pos[1:] >= pos[:-1]).all())
    if ok:
        return
    if layout.pos_width in (0, 64) or count <= index_max(layout.pos_width):
        raise SparsecompError(
            f"{where}: the kernel built an invalid sparse result: the positions of level "
            f"{lvl} ({layout.levels[lvl]}) do not rise from 0 to its {count} entries",
            hint="the program broke a rule of MLIR's sparse_tensor dialect that upstream "
            "code does not check: inserts into a sparse tensor (tensor.insert) must come "
            "in lexicographic order of the coordinates, and a reshape's sizes "
            "(tensor.expand_shape's output_shape) must multiply out to its source's",
        )
    _overflowed(layout, lvl, count, where)


def _check_pairs(layout: Layout, lvl: int, pos: np.ndarray, count: int, where: str) -> None:
    pairs = pos[: pos.shape[0] // 2 * 2].astype(np.int64)  # upstream's buffer has one more
    lo, hi = pairs[0::2], pairs[1::2]
    fits = count <= index_max(layout.pos_width)
    if not (fits and (lo >= 0).all() and (lo <= hi).all() and (hi <= count).all()):
        _overflowed(layout, lvl, count, where)


def _overflowed(layout: Layout, lvl: int, count: int, where: str) -> None:
    # below a level with positions, the count comes from that level's positions, which
    # wrapped too (a 40 x 40 DCSR product of 1289 entries showed 1280)
    outer = any(level.kind in ("compressed", "loose_compressed") for level in layout.levels[:lvl])
    counted = f"{count} (counted from wrapped positions)" if outer else str(count)
    raise SparsecompError(
        f"{where}: the positions of level {lvl} ({layout.levels[lvl]}) overflowed: the "
        f"result stores {counted} entries there, more than {layout.pos_width}-bit positions "
        f"address (at most {index_max(layout.pos_width)})",
        hint="declare the result layout with a wider pos_width (32 or 64)",
    )
