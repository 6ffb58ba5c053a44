"""The metadata layout of PTX ``mma.sp`` for 2:4 sparsity (numpy only).

For 2:4, :func:`to_mma_sp` packs ``indices`` into the ``uint32`` metadata words
of PTX ``mma.sp.sync.aligned.m16n8k16`` / ``m16n8k32`` (``.f16``/``.bf16``), in
the order in which a warp consumes them, and :func:`from_mma_sp` unpacks them.
:func:`mma_sp_thread_registers` and :func:`mma_sp_reference` simulate one
instruction from the PTX ISA's fragment description, as an independent check of
that order. ``docs/nm-metadata.md`` describes the bit layout and its sources.

Storage order of the metadata words (``to_mma_sp``)
---------------------------------------------------
Rows are cut into 16-row tiles and groups into k-tiles of 4 groups (``m16n8k16``,
16 dense columns) or 8 groups (``m16n8k32``, 32 dense columns); rows and
groups are padded with zero-valued groups whose indices are ``[0, 1]``
(nibble ``0b0100``; ``0b0000`` is an invalid encoding). The result is a flat
``uint32`` array of ``row_tiles * k_tiles * W`` words, row tile major, then k
tile, then the ``W`` words of that tile (``W`` = 8 or 16) in the order of the
lanes that pass them as the metadata operand with sparsity selector 0:

* ``m16n8k16``: word ``g`` (``g = 0..7``) belongs to lane ``4g``; a lane
  loads word ``lane >> 2``.
* ``m16n8k32``: word ``2g + p`` (``p = 0, 1``) belongs to lane ``4g + p``; a
  lane loads word ``2 * (lane >> 2) + (lane & 1)``.

So one coalesced 32-byte (k16) or 64-byte (k32) load per tile gives every lane
the register it needs, for any valid sparsity selector (the lanes of the other
thread(s) of each quad load copies). Inside a word, bits
``16h + 4j + 2s .. 16h + 4j + 2s + 1`` hold slot ``s`` of row ``g + 8h`` and
group ``j`` of the word's 16 dense columns (``j`` counts from group ``4p`` of
the k-tile for ``m16n8k32``); slot 0 is the smaller index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sparsecomp.errors import FormatError
from sparsecomp.formats.nm import _check_indices, _count, _groups, _matrix

#: The ``mma.sp`` shapes whose 2:4 metadata layout this module implements.
MMA_SP_SHAPES = ("m16n8k16", "m16n8k32")
#: Rows of A per ``mma.sp`` tile.
TILE_ROWS = 16
#: Columns of B (and D) per ``mma.sp`` tile.
TILE_N = 8
_K = {"m16n8k16": 16, "m16n8k32": 32}
#: Metadata nibble of a padding group: indices [0, 1].
_PAD_NIBBLE = 0b0100
#: Shift of the nibble of (row half h, group j) inside a word: 16h + 4j.
_SHIFTS = (16 * np.arange(2)[:, None] + 4 * np.arange(4)).astype(np.uint32)


# -- n:m -----------------------------------------------------------------------
# -- mma.sp metadata -----------------------------------------------------------
def _k_groups(shape: str) -> int:
    """Groups of 4 dense columns per k-tile of ``shape``: 4 (k16) or 8 (k32)."""
    if shape not in _K:
        raise FormatError(
            f"unknown mma.sp shape '{shape}'; expected one of {', '.join(MMA_SP_SHAPES)}"
        )
    return _K[shape] // 4


def _pairs(name: str, array: npt.ArrayLike, rows: int, groups: int) -> np.ndarray:
    """``array`` as a ``(rows, 2 * groups)`` matrix of 2:4 slots."""
    out = _matrix(name, array)
    if out.shape != (rows, 2 * groups):
        raise FormatError(
            f"2:4 {name} for {rows} rows and {groups} groups must have shape "
            f"({rows}, {2 * groups}), got {out.shape}"
        )
    return out


def mma_sp_tiles(rows: int, groups: int, shape: str) -> tuple[int, int]:
    """``(row_tiles, k_tiles)`` for a ``rows x (4 * groups)`` 2:4 matrix."""
    k_groups = _k_groups(shape)
    rows, groups = _count("rows", rows), _count("groups", groups)
    return _groups(rows, TILE_ROWS), _groups(groups, k_groups)


def mma_sp_words_per_tile(shape: str) -> int:
    """Metadata words per 16-row tile and k-tile: 8 (k16) or 16 (k32)."""
    return 2 * _k_groups(shape)


def _tile_order(a: np.ndarray, k_groups: int) -> np.ndarray:
    """``(R*16, K*k_groups, ...)`` (row, group) -> ``(R, K, 8, p, 2, 4, ...)``.

    The axes are (row tile, k tile, quad g, word-in-quad p, row half h, group j):
    row = 16 R + 8 h + g, group = k_groups K + 4 p + j.
    """
    row_tiles, k_tiles = a.shape[0] // TILE_ROWS, a.shape[1] // k_groups
    p = k_groups // 4
    a = a.reshape(row_tiles, 2, 8, k_tiles, p, 4, *a.shape[2:])
    return a.transpose(0, 3, 2, 4, 1, 5, *range(6, a.ndim))


def _from_tile_order(a: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_tile_order` (for arrays without trailing axes)."""
    row_tiles, k_tiles, _, p = a.shape[:4]
    return a.transpose(0, 4, 2, 1, 3, 5).reshape(row_tiles * TILE_ROWS, k_tiles * 4 * p)


def to_mma_sp(indices: npt.ArrayLike, rows: int, groups: int, shape: str) -> np.ndarray:
    """Pack 2:4 ``indices`` ``(rows, 2 * groups)`` into ``mma.sp`` metadata words.

    ``shape`` is ``"m16n8k16"`` or ``"m16n8k32"``. Returns a flat ``uint32``
    array of ``row_tiles * k_tiles * words_per_tile`` words in the storage order
    of the module docstring; rows and groups are padded to whole tiles with
    indices ``[0, 1]``. Each pair must be strictly ascending (the order
    ``mma.sp::ordered_metadata`` requires).
    """
    k_groups = _k_groups(shape)
    row_tiles, k_tiles = mma_sp_tiles(rows, groups, shape)
    indices = _pairs("indices", indices, rows, groups)
    if indices.dtype.kind not in "iu":
        raise FormatError(f"indices must be integers, got dtype {indices.dtype}")
    idx = indices.astype(np.int64).reshape(rows, groups, 2)
    _check_indices(idx, 4, "2:4 indices")
    nibbles = np.full((row_tiles * TILE_ROWS, k_tiles * k_groups), _PAD_NIBBLE, dtype=np.uint32)
    nibbles[:rows, :groups] = idx[..., 0] | (idx[..., 1] << 2)
    words = np.bitwise_or.reduce(_tile_order(nibbles, k_groups) << _SHIFTS, axis=(-2, -1))
    return np.ascontiguousarray(words, dtype=np.uint32).reshape(-1)


def from_mma_sp(meta: npt.ArrayLike, rows: int, groups: int, shape: str) -> np.ndarray:
    """Unpack ``mma.sp`` metadata words into 2:4 indices ``(rows, 2 * groups)`` (``uint8``).

    The exact inverse of :func:`to_mma_sp` on the unpadded region; ``meta`` may
    have any shape holding ``row_tiles * k_tiles * words_per_tile`` integers
    (signed 32-bit words are read as their bit pattern).
    """
    k_groups = _k_groups(shape)
    row_tiles, k_tiles = mma_sp_tiles(rows, groups, shape)
    meta = np.asarray(meta)
    if meta.dtype.kind not in "iu":
        raise FormatError(f"mma.sp metadata must be integers, got dtype {meta.dtype}")
    expected = row_tiles * k_tiles * 2 * k_groups
    if meta.size != expected:
        raise FormatError(
            f"{shape} metadata for {rows} rows and {groups} groups needs {expected} words, "
            f"got {meta.size}"
        )
    words = meta.astype(np.uint32).reshape(row_tiles, k_tiles, 8, k_groups // 4)
    nibbles = (words[..., None, None] >> _SHIFTS) & 0xF
    nibbles = _from_tile_order(nibbles)[:rows, :groups]
    pairs = np.stack([nibbles & 3, nibbles >> 2], axis=-1)
    return pairs.astype(np.uint8).reshape(rows, 2 * groups)


def mma_sp_bit_layout(shape: str) -> np.ndarray:
    """What each 2-bit field of each word of one tile holds: ``(W, 16, 3)`` ints.

    ``layout[w, f] = (row, group, slot)``: bits ``2f, 2f+1`` of word ``w`` of a
    tile (in :func:`to_mma_sp` order) hold index ``slot`` (0 = the smaller) of
    group ``group`` (of the k-tile, 4 dense columns each) of row ``row`` (of the
    16-row tile).
    """
    k_groups = _k_groups(shape)
    row, group = np.meshgrid(np.arange(TILE_ROWS), np.arange(k_groups), indexing="ij")
    coords = _tile_order(np.stack([row, group], axis=-1), k_groups)  # (1, 1, 8, p, 2, 4, 2)
    coords = np.repeat(coords.reshape(-1, 8, 2), 2, axis=1)  # (W, field = 2 * (4h + j) + s, 2)
    slots = np.broadcast_to(np.tile(np.arange(2), 8)[:, None], (coords.shape[0], 16, 1))
    return np.concatenate([coords, slots], axis=-1)


def mma_sp_word_lanes(shape: str, selector: int = 0) -> np.ndarray:
    """The lane whose metadata operand is word ``w`` of a tile, for ``w = 0..W-1``.

    Per the PTX ISA: for ``m16n8k16`` one thread per quad (``selector`` 0..3)
    supplies the metadata, for ``m16n8k32`` a thread pair (``selector`` 0:
    T0/T1, 1: T2/T3).
    """
    k_groups = _k_groups(shape)
    selector = _count("selector", selector)
    p = k_groups // 4
    if selector >= 4 // p:
        raise FormatError(f"{shape} takes sparsity selector 0..{4 // p - 1}, got {selector}")
    word = np.arange(8 * p)
    return 4 * (word // p) + p * selector + word % p


def mma_sp_lane_words(shape: str) -> np.ndarray:
    """The word of a tile (in :func:`to_mma_sp` order) that lane ``l`` loads, ``l = 0..31``.

    Every lane gets the word that it must supply under any valid sparsity
    selector, so the whole tile is one contiguous load.
    """
    p = _k_groups(shape) // 4
    lane = np.arange(32)
    return p * (lane >> 2) + (lane & (p - 1))


def mma_sp_tile_operands(
    values: npt.ArrayLike,
    meta: npt.ArrayLike,
    rows: int,
    groups: int,
    shape: str,
    row_tile: int,
    k_tile: int,
) -> tuple[np.ndarray, np.ndarray]:
    """One tile's compressed A values ``(16, K/2)`` and metadata words ``(W,)``.

    ``values`` is the ``(rows, 2 * groups)`` 2:4 values array (zero-padded here
    to whole tiles) and ``meta`` the output of :func:`to_mma_sp`.
    """
    k_groups = _k_groups(shape)
    row_tiles, k_tiles = mma_sp_tiles(rows, groups, shape)
    values = _pairs("values", values, rows, groups)
    if not (0 <= row_tile < row_tiles and 0 <= k_tile < k_tiles):
        raise FormatError(
            f"tile ({row_tile}, {k_tile}) is outside the {row_tiles} x {k_tiles} tiles"
        )
    meta = np.asarray(meta)
    if meta.size != row_tiles * k_tiles * 2 * k_groups:
        raise FormatError(
            f"{shape} metadata needs {row_tiles * k_tiles * 2 * k_groups} words, got {meta.size}"
        )
    r0, c0 = row_tile * TILE_ROWS, k_tile * 2 * k_groups
    tile = np.zeros((TILE_ROWS, 2 * k_groups), dtype=values.dtype)
    part = values[r0 : r0 + TILE_ROWS, c0 : c0 + 2 * k_groups]
    tile[: part.shape[0], : part.shape[1]] = part
    words = meta.astype(np.uint32).reshape(row_tiles, k_tiles, 2 * k_groups)[row_tile, k_tile]
    return tile, words


@dataclass(frozen=True)
class MmaSpRegisters:
    """What the 32 lanes of a warp hold for one ``mma.sp`` A operand.

    ``a[lane, r]`` is the pair of f16/bf16 values in A register ``r`` (low half
    first); ``e[lane]`` is the lane's 32-bit metadata register.
    """

    a: np.ndarray
    e: np.ndarray


def _fragment_coords(shape: str) -> tuple[np.ndarray, np.ndarray]:
    """``(row, chunk)`` of each lane's A registers, ``(32, K/8)`` each, per the PTX ISA.

    Sparse ``m16n8k16``/``m16n8k32`` with ``.f16``/``.bf16``: row = groupID for
    a0, a1 (and a4, a5), groupID + 8 otherwise; the two values of a register
    come from the 4-column chunk starting at ``threadID_in_group * 4`` (+ 16 for
    a4..a7).
    """
    n_regs = _K[shape] // 8
    lane = np.arange(32)[:, None]
    reg = np.arange(n_regs)[None, :]
    group_id, thread_in_group = lane >> 2, lane % 4
    row = group_id + 8 * (reg % 2)
    chunk = thread_in_group + 4 * (reg // 2)
    return row, chunk


def mma_sp_thread_registers(
    a_values: npt.ArrayLike, meta: npt.ArrayLike, shape: str
) -> MmaSpRegisters:
    """Each lane's registers for one tile: A fragments and the loaded metadata word.

    ``a_values`` is the tile's compressed A, ``(16, K/2)`` (the two kept values of
    chunk ``c`` at columns ``2c, 2c + 1``); ``meta`` its ``W`` words in
    :func:`to_mma_sp` order, loaded as :func:`mma_sp_lane_words` says.
    """
    k_groups = _k_groups(shape)
    a_values = _matrix("a_values", a_values)
    if a_values.shape != (TILE_ROWS, 2 * k_groups):
        raise FormatError(
            f"{shape} A values must have shape ({TILE_ROWS}, {2 * k_groups}), got {a_values.shape}"
        )
    meta = np.asarray(meta).reshape(-1)
    if meta.size != 2 * k_groups:
        raise FormatError(f"{shape} takes {2 * k_groups} metadata words, got {meta.size}")
    row, chunk = _fragment_coords(shape)
    a = a_values[row[..., None], 2 * chunk[..., None] + np.arange(2)]
    return MmaSpRegisters(a=a, e=meta.astype(np.uint32)[mma_sp_lane_words(shape)])


def mma_sp_reference(
    a_values: npt.ArrayLike, meta: npt.ArrayLike, b: npt.ArrayLike, shape: str, selector: int = 0
) -> np.ndarray:
    """``D = A @ B`` for one ``m16n8kK`` tile, decoding metadata as the PTX ISA describes.

    The lanes' registers come from :func:`mma_sp_thread_registers`; each A value
    is placed by the 2-bit index that the hardware reads: from the metadata
    register of lane ``4 * groupID + selector`` (k16) or
    ``4 * groupID + 2 * selector + chunk // 4`` (k32), bits
    ``16 * (row >= 8) + 4 * (chunk % 4) + 2 * slot``. ``b`` is ``(K, 8)``.
    Raises :class:`FormatError` for a metadata pair that is not strictly
    ascending (undefined behavior for ``mma.sp::ordered_metadata``).
    """
    k_groups = _k_groups(shape)
    k = _K[shape]
    regs = mma_sp_thread_registers(a_values, meta, shape)
    mma_sp_word_lanes(shape, selector)  # validates the selector
    b = _matrix("b", b)
    if b.shape != (k, TILE_N):
        raise FormatError(f"{shape} B must have shape ({k}, {TILE_N}), got {b.shape}")
    row, chunk = _fragment_coords(shape)  # (32, regs)
    p = k_groups // 4
    holder = 4 * (np.arange(32)[:, None] >> 2) + p * selector + chunk // 4
    first_bit = 16 * (row >= 8) + 4 * (chunk % 4)
    word = regs.e[holder]
    idx = (word[..., None] >> (first_bit[..., None] + 2 * np.arange(2)).astype(np.uint32)) & 3
    unordered = idx[..., 0] >= idx[..., 1]
    if unordered.any():
        lane, reg = np.unravel_index(int(np.argmax(unordered)), unordered.shape)
        raise FormatError(
            f"metadata for row {row[lane, reg]}, chunk {chunk[lane, reg]} holds indices "
            f"{idx[lane, reg].tolist()}, which are not strictly ascending"
        )
    dense = np.zeros((TILE_ROWS, k), dtype=np.result_type(regs.a, b))
    dense[row[..., None], 4 * chunk[..., None] + idx] = regs.a
    return dense @ b


def mma_sp_matmul_reference(
    values: npt.ArrayLike,
    meta: npt.ArrayLike,
    rows: int,
    groups: int,
    b: npt.ArrayLike,
    shape: str,
) -> np.ndarray:
    """``A @ B`` for a whole 2:4 matrix, one :func:`mma_sp_reference` call per tile.

    ``values`` is ``(rows, 2 * groups)``, ``meta`` from :func:`to_mma_sp`, ``b`` is
    ``(cols, N)`` with ``ceil(cols / 4) == groups``. A slow reference for tests.
    """
    k = 4 * _k_groups(shape)
    row_tiles, k_tiles = mma_sp_tiles(rows, groups, shape)
    b = _matrix("b", b)
    if _groups(b.shape[0], 4) != groups:
        raise FormatError(f"B must have {4 * groups - 3}..{4 * groups} rows, got {b.shape[0]}")
    n_cols = b.shape[1]
    n_tiles = _groups(n_cols, TILE_N)
    b_pad = np.zeros((k_tiles * k, n_tiles * TILE_N), dtype=b.dtype)
    b_pad[: b.shape[0], :n_cols] = b
    values_arr = _matrix("values", values)
    out = np.zeros((row_tiles * TILE_ROWS, n_tiles * TILE_N), dtype=np.result_type(values_arr, b))
    for rt in range(row_tiles):
        for kt in range(k_tiles):
            a_tile, words = mma_sp_tile_operands(values_arr, meta, rows, groups, shape, rt, kt)
            for nt in range(n_tiles):
                b_tile = b_pad[kt * k : (kt + 1) * k, nt * TILE_N : (nt + 1) * TILE_N]
                out[rt * TILE_ROWS : (rt + 1) * TILE_ROWS, nt * TILE_N : (nt + 1) * TILE_N] += (
                    mma_sp_reference(a_tile, words, b_tile, shape)
                )
    return out[:rows, :n_cols]


__all__ = [
    "MMA_SP_SHAPES",
    "TILE_N",
    "TILE_ROWS",
    "MmaSpRegisters",
    "from_mma_sp",
    "mma_sp_bit_layout",
    "mma_sp_lane_words",
    "mma_sp_matmul_reference",
    "mma_sp_reference",
    "mma_sp_thread_registers",
    "mma_sp_tile_operands",
    "mma_sp_tiles",
    "mma_sp_word_lanes",
    "mma_sp_words_per_tile",
    "to_mma_sp",
]
