"""n:m structured sparsity and the metadata layout of PTX ``mma.sp`` (numpy only).

A matrix is *n:m sparse* when every group of ``m`` consecutive elements of a
row (along the last, reduction, axis) holds at most ``n`` nonzeros. It is
stored as two ``(rows, groups * n)`` arrays (the ``nm:N:M`` layout, a
``structured[n,m]`` last level):

* ``values``: the kept elements of each group, in column order;
* ``indices`` (``uint8``): each kept element's position ``0..m-1`` inside its
  group, ascending within a group.

A group with fewer than ``n`` nonzeros is padded with the smallest unused
positions, holding zeros. A last group that is cut short by the column count is
treated as zero-padded to ``m`` columns; its padding slots may then name
positions past the last column (they always hold zeros).

The 2:4 metadata of PTX ``mma.sp`` is in :mod:`sparsecomp.formats.mma_sp`.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import numpy.typing as npt

from sparsecomp.errors import FormatError


def _nm(n: Any, m: Any) -> tuple[int, int]:
    try:
        n, m = operator.index(n), operator.index(m)
    except TypeError:
        raise FormatError(f"n and m must be integers, got {n!r}:{m!r}") from None
    if not 0 < n <= m:
        raise FormatError(f"n:m needs 0 < n <= m, got {n}:{m}")
    if m > 256:
        raise FormatError(f"n:m indices are stored as uint8, so m must be at most 256, got {m}")
    return n, m


def _count(name: str, value: Any) -> int:
    try:
        value = operator.index(value)
    except TypeError:
        raise FormatError(f"{name} must be an integer, got {value!r}") from None
    if value < 0:
        raise FormatError(f"{name} must be >= 0, got {value}")
    return int(value)


def _matrix(name: str, array: Any) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim != 2:
        raise FormatError(f"{name} must be a 2-D array, got shape {array.shape}")
    return array


def _groups(cols: int, m: int) -> int:
    return -(-cols // m)


def _grouped(dense: np.ndarray, m: int) -> np.ndarray:
    """``dense`` zero-padded to whole groups, as ``(rows, groups, m)``."""
    rows, cols = dense.shape
    groups = _groups(cols, m)
    padded = np.pad(dense, ((0, 0), (0, groups * m - cols)))
    return padded.reshape(rows, groups, m)


def check_nm(dense: npt.ArrayLike, n: int, m: int) -> None:
    """Raise :class:`FormatError` unless every m-group of every row has <= n nonzeros.

    Groups run along the last (reduction) axis; a last group cut short by the
    column count is checked as if zero-padded. The message names the first
    offending group in row-major order, e.g.
    ``not 2:4: row 3, columns 8..11 hold 3 nonzeros``. NaN counts as nonzero.
    """
    n, m = _nm(n, m)
    dense = _matrix("dense", dense)
    cols = dense.shape[1]
    counts = np.count_nonzero(_grouped(dense, m), axis=-1)
    bad = counts > n
    if bad.any():
        row, group = np.unravel_index(int(np.argmax(bad)), bad.shape)
        first = int(group) * m
        last = min(first + m, cols) - 1
        raise FormatError(
            f"not {n}:{m}: row {row}, columns {first}..{last} hold {counts[row, group]} nonzeros"
        )


def compress_nm(dense: npt.ArrayLike, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Split an n:m sparse matrix into ``(values, indices)``, both ``(rows, groups * n)``.

    ``indices`` is ``uint8``, ascending within each group; groups with fewer than
    ``n`` nonzeros are padded with the smallest unused positions (zero values).
    ``values`` keeps the dtype of ``dense``. Raises :class:`FormatError` when
    ``dense`` is not n:m (see :func:`check_nm`).
    """
    n, m = _nm(n, m)
    dense = _matrix("dense", dense)
    check_nm(dense, n, m)
    rows = dense.shape[0]
    grouped = _grouped(dense, m)
    # Nonzeros sort first (key = position), zeros after (key = m + position):
    # the first n keys are all nonzeros plus the smallest unused positions.
    key = np.where(grouped != 0, 0, m) + np.arange(m)
    chosen = np.sort(np.argsort(key, axis=-1, kind="stable")[..., :n], axis=-1)
    width = grouped.shape[1] * n
    values = np.take_along_axis(grouped, chosen, axis=-1).reshape(rows, width)
    return values, chosen.astype(np.uint8).reshape(rows, width)


def _check_indices(idx: np.ndarray, m: int, what: str) -> None:
    """``idx`` is ``(rows, groups, n)``: each group's indices in ``0..m-1``, strictly ascending."""
    if idx.size == 0:
        return
    out_of_range = (idx < 0) | (idx >= m)
    if out_of_range.any():
        row, group, slot = np.unravel_index(int(np.argmax(out_of_range)), idx.shape)
        raise FormatError(
            f"{what}: row {row}, group {group} has index {idx[row, group, slot]}, "
            f"expected 0..{m - 1}"
        )
    if idx.shape[-1] > 1:
        unordered = (np.diff(idx, axis=-1) <= 0).any(axis=-1)
        if unordered.any():
            row, group = np.unravel_index(int(np.argmax(unordered)), unordered.shape)
            raise FormatError(
                f"{what}: row {row}, group {group} has indices "
                f"{idx[row, group].tolist()}, which are not strictly ascending"
            )


def decompress_nm(
    values: npt.ArrayLike, indices: npt.ArrayLike, cols: int, n: int, m: int
) -> np.ndarray:
    """The dense ``(rows, cols)`` matrix of ``(values, indices)``; inverse of :func:`compress_nm`.

    Raises :class:`FormatError` for mismatched shapes, indices outside ``0..m-1``
    or not strictly ascending within a group, and nonzero values that land past
    the last column.
    """
    n, m = _nm(n, m)
    cols = _count("cols", cols)
    values = _matrix("values", values)
    indices = _matrix("indices", indices)
    if values.shape != indices.shape:
        raise FormatError(
            f"values and indices must have the same shape, got {values.shape} and {indices.shape}"
        )
    if indices.dtype.kind not in "iu":
        raise FormatError(f"indices must be integers, got dtype {indices.dtype}")
    rows = values.shape[0]
    groups = _groups(cols, m)
    if values.shape[1] != groups * n:
        raise FormatError(
            f"{cols} columns at {n}:{m} need {groups * n} stored columns, got {values.shape[1]}"
        )
    idx = indices.astype(np.int64).reshape(rows, groups, n)
    _check_indices(idx, m, f"{n}:{m} indices")
    out = np.zeros((rows, groups, m), dtype=values.dtype)
    np.put_along_axis(out, idx, values.reshape(rows, groups, n), axis=-1)
    out = out.reshape(rows, groups * m)
    spill = out[:, cols:] != 0
    if spill.any():
        row, col = np.unravel_index(int(np.argmax(spill)), spill.shape)
        raise FormatError(
            f"row {row} stores a nonzero at column {cols + int(col)}, past the last column "
            f"{cols - 1}"
        )
    return np.ascontiguousarray(out[:, :cols])


__all__ = ["check_nm", "compress_nm", "decompress_nm"]
