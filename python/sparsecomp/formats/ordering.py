"""Lexicographic ordering of coordinate tuples, vectorized.

Coordinates are ``(k, n)`` int64 arrays (``k`` coordinates per entry) with
known extents. When the product of the extents fits int64 the tuples are
compared through one linearized key; otherwise level by level.
"""

from __future__ import annotations

import math

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.validate import INT64_MAX


def linear_key(crds: np.ndarray, extents: tuple[int, ...]) -> np.ndarray | None:
    """Row-major linear index of each tuple, or None when it could overflow int64."""
    if math.prod(extents) - 1 > INT64_MAX:
        return None
    if not extents:
        return np.zeros(crds.shape[1], np.int64)
    key = crds[0].copy()
    for row, size in zip(crds[1:], extents[1:], strict=True):
        key *= size
        key += row
    return key


def sort_entries(
    crds: np.ndarray, extents: tuple[int, ...]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(order, sorted_key)``: the stable sorting permutation (None if already sorted).

    ``sorted_key`` is the linear key in sorted order, or None when the extents
    are too large for one; sortedness is checked first, which is cheap.
    """
    key = linear_key(crds, extents)
    if key is not None:
        if key.shape[0] < 2 or bool((key[1:] >= key[:-1]).all()):
            return None, key
        order = np.argsort(key, kind="stable")
        return order, key[order]
    if _lex_nondecreasing(crds):
        return None, None
    return np.lexsort(crds[::-1]), None


def _lex_nondecreasing(crds: np.ndarray) -> bool:
    n = crds.shape[1]
    if n < 2:
        return True
    ok = np.ones(n - 1, dtype=bool)
    for row in crds[::-1]:
        a, b = row[:-1], row[1:]
        ok = (a < b) | ((a == b) & ok)
    return bool(ok.all())


def duplicate_index(crds: np.ndarray, key: np.ndarray | None) -> int | None:
    """In sorted tuples, the first ``i`` with tuple ``i`` equal to tuple ``i + 1``, or None."""
    if crds.shape[1] < 2:
        return None
    if key is not None:
        eq = key[1:] == key[:-1]
    else:
        eq = np.ones(crds.shape[1] - 1, dtype=bool)
        for row in crds:
            eq &= row[1:] == row[:-1]
    return int(np.argmax(eq)) if eq.any() else None


def check_no_duplicates(
    coords: np.ndarray, ordered: np.ndarray, order: np.ndarray | None, key: np.ndarray | None
) -> None:
    """FormatError naming the first repeated coordinate of ``coords`` (input order).

    ``ordered`` holds the same tuples (or an order-preserving image of them)
    sorted by ``order`` (None: already sorted), with ``key`` from
    :func:`sort_entries`.
    """
    dup = duplicate_index(ordered, key)
    if dup is None:
        return
    a, b = (dup, dup + 1) if order is None else (int(order[dup]), int(order[dup + 1]))
    tup = tuple(int(c) for c in coords[:, a])
    raise FormatError(f"duplicate coordinate {tup} (entries {min(a, b)} and {max(a, b)})")


def sum_duplicates(
    coords: np.ndarray, values: np.ndarray, extents: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Entries sorted, with the values of equal coordinates added up (new arrays)."""
    order, _ = sort_entries(coords, extents)
    if order is not None:
        coords, values = coords[:, order], values[order]
    if coords.shape[1] < 2:
        return coords.copy(), values.copy()
    new = np.ones(coords.shape[1], dtype=bool)
    new[1:] = np.any(coords[:, 1:] != coords[:, :-1], axis=0)
    starts = np.flatnonzero(new)
    return coords[:, starts], np.add.reduceat(values, starts)
