"""Storage sizes: the bytes a tensor takes in a layout, before it is packed.

:func:`storage_bytes` walks the levels the way packing does
(:mod:`sparsecomp.formats.storage`), counting the positions each level
stores. Where the layout fixes them the count is a closed formula of the
shape: dense levels multiply it by their size, ELL with a fixed width by the
width, n:m by ``n``, singletons keep it. Levels whose count depends on the
data (``compressed``, ``loose_compressed``, ``dense_varied``, ELL of run-time
width) need it given, in ``counts``; the last such level may instead be
derived from ``nse``, the number of stored entries (the values buffer's
length). So CSR, COO, BSR and n:m need only ``nse`` (BSR: ``nse`` is the
number of blocks times the block size), DCSR also the number of stored rows.

Buffers: per level its positions (``dense_varied`` and ``compressed``:
``parents + 1``; ``loose_compressed``: ``2 * parents``) and coordinates (one
per stored position; ELL's padding included), at the layout's bit widths
(width 0 is ``index``, 8 bytes); the packed ``mma.sp`` metadata of a 2:4
level in 32-bit words; then the values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.levels import Level
from sparsecomp.formats.names import AnyLayout, parse_layout
from sparsecomp.formats.validate import check_value_dtype

__all__ = ["data_levels", "storage_bytes"]


def data_levels(layout: Layout) -> list[int]:
    """The levels whose number of stored positions depends on the data."""
    return [lvl for lvl, level in enumerate(layout.levels) if _is_data_level(level)]


def _is_data_level(level: Level) -> bool:
    if level.kind == "dense":
        return level.varied
    if level.kind == "compressed":
        return level.varied or level.width is None
    return level.kind == "loose_compressed"


def _index_bytes(width: int) -> int:
    return 8 if width == 0 else width // 8


def storage_bytes(
    layout: AnyLayout | str,
    shape: Sequence[int],
    dtype: Any = np.float32,
    *,
    nse: int | None = None,
    counts: Mapping[int, int] | None = None,
) -> int:
    """Bytes of all buffers of a ``shape`` tensor of ``dtype`` values in ``layout``.

    ``counts[l]``: the positions level ``l`` stores, for the levels of
    :func:`data_levels`; ``nse`` (stored entries) stands for the last of them
    that ``counts`` leaves out. A missing count is a :class:`FormatError`
    naming the level. Composable layouts need per-part sizes: sum
    :func:`storage_bytes` over the parts.
    """
    shape = tuple(int(s) for s in shape)
    resolved = parse_layout(layout, len(shape)) if isinstance(layout, str) else layout
    if isinstance(resolved, Composable):
        raise FormatError("a composable layout's size is the sum of its parts' sizes")
    itemsize = check_value_dtype(dtype).itemsize
    negative = [f"nse={nse}"] if nse is not None and nse < 0 else []
    negative += [f"dimension {d} is {n}" for d, n in enumerate(shape) if n < 0]
    negative += [f"counts[{lvl}]={n}" for lvl, n in (counts or {}).items() if n < 0]
    if negative:
        raise FormatError(f"sizes and counts are >= 0: {', '.join(negative)}")
    known = dict(counts or {})
    missing = [lvl for lvl in data_levels(resolved) if lvl not in known]
    if missing and nse is not None:
        last = missing.pop()
        known[last] = _count_from_nse(resolved, shape, last, nse)
    if missing:
        names = ", ".join(f"{lvl} ({resolved.levels[lvl]})" for lvl in missing)
        raise FormatError(
            f"the size of level(s) {names} depends on the data: give counts={{level: positions}}"
        )
    total, parents = 0, 1
    pos_bytes, crd_bytes = _index_bytes(resolved.pos_width), _index_bytes(resolved.crd_width)
    lvl_shape = resolved.dim_to_lvl.level_shape(shape)
    for lvl, level in enumerate(resolved.levels):
        if level.kind == "loose_compressed":
            total += 2 * parents * pos_bytes
        elif level.varied:
            total += (parents + 1) * pos_bytes
        stored = known[lvl] if lvl in known else _fixed_count(level, parents, lvl_shape[lvl])
        if level.kind == "structured" and resolved.nm_metadata.startswith("mma_sp"):
            total += _mma_sp_bytes(resolved, lvl_shape)
        elif level.has_coordinates:
            total += stored * crd_bytes
        parents = stored
    return total + parents * itemsize


def _fixed_count(level: Level, parents: int, size: int) -> int:
    """Positions of a level whose count the layout fixes."""
    if level.kind == "dense":
        return parents * size
    if level.kind == "compressed":  # ELL with a static width
        return parents * int(level.width or 0)
    if level.kind == "structured":
        return parents * level.n
    return parents  # singleton


def _count_from_nse(layout: Layout, shape: tuple[int, ...], lvl: int, nse: int) -> int:
    """Positions of data level ``lvl`` given ``nse`` stored entries (later levels are fixed)."""
    lvl_shape = layout.dim_to_lvl.level_shape(shape)
    factor = 1
    for later in range(lvl + 1, len(layout.levels)):
        factor *= _fixed_count(layout.levels[later], 1, lvl_shape[later])
    if factor == 0:
        return 0
    if nse % factor:
        raise FormatError(
            f"nse {nse} is not a multiple of {factor}, the entries per position "
            f"of level {lvl} ({layout.levels[lvl]})"
        )
    return nse // factor


def _mma_sp_bytes(layout: Layout, lvl_shape: tuple[int, ...]) -> int:
    from sparsecomp.formats import mma_sp
    from sparsecomp.formats.structured import mma_grid

    shape = layout.nm_metadata.removeprefix("mma_sp_")
    rows, groups = mma_grid(layout, lvl_shape)
    row_tiles, k_tiles = mma_sp.mma_sp_tiles(rows, groups, shape)
    return row_tiles * k_tiles * mma_sp.mma_sp_words_per_tile(shape) * 4
