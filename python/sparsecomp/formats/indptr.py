"""Compressed (CSR/CSC) positions in memory proportional to the entries.

A matrix with many more rows than entries (a ``(2**31 + 5) x 10`` matrix
with 3 nonzeros) still has a CSR positions buffer of ``rows + 1``: the
layout's own size, which is unavoidable. Everything else here stays within
O(nnz) beyond that buffer: positions are built in the layout's own dtype
from sorted major indices (no int64 ``bincount``/``indptr`` of the
dimension, as ``scipy``'s conversions allocate), and checks of a positions
buffer work through it in fixed-size chunks.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError

_CHUNK = 1 << 20  # elements per chunk of a check over a positions buffer
_SHORT = 32  # positions checked in Python, below numpy's per-call costs
#: signed index dtype -> (its largest value, the unsigned dtype of its size)
_UNSIGNED = {
    np.dtype(t): (int(np.iinfo(t).max), np.dtype(u))
    for t, u in ((np.int8, np.uint8), (np.int16, np.uint16), (np.int32, np.uint32),
                 (np.int64, np.uint64))
}  # fmt: skip


def nondecreasing(ptr: np.ndarray) -> bool:
    """Whether ``ptr`` never decreases (temporaries of at most ``_CHUNK`` elements)."""
    if ptr.shape[0] <= _SHORT:  # a few elements: Python beats numpy's per-call costs
        items = ptr.tolist()
        return all(a <= b for a, b in itertools.pairwise(items))
    for start in range(0, max(ptr.shape[0] - 1, 0), _CHUNK):
        piece = ptr[start : start + _CHUNK + 1]
        if bool((piece[1:] < piece[:-1]).any()):
            return False
    return True


def check_compressed(what: str, sizes: tuple[int, int], indptr: Any, indices: Any) -> None:
    """What a kernel relies on in compressed buffers: every read stays in bounds.

    ``indptr``: ``major + 1`` non-decreasing positions from 0 to
    ``len(indices)``; every index in ``[0, minor)``. Sortedness within a row
    is the caller's promise (scipy's canonical flag), never a safety issue.
    """
    major, minor = sizes
    nnz = indices.shape[0]
    check_positions(what, major, indptr, nnz)
    if nnz and not in_range(indices, minor):
        raise FormatError(f"{what}: an index is out of range for size {minor}")


def check_positions(what: str, major: int, indptr: Any, nnz: int) -> None:
    """The positions part of :func:`check_compressed`: ``major + 1`` positions from 0
    to ``nnz``, non-decreasing (O(major)). A kernel that guards its coordinates
    needs no more (``sparse-iter-guard-coordinates``)."""
    if indptr.shape[0] != major + 1 or indptr[0] != 0 or indptr[-1] != nnz:
        raise FormatError(f"{what}: indptr/indices lengths are inconsistent")
    if not nondecreasing(indptr):
        raise FormatError(f"{what}: indptr decreases")


def in_range(indices: np.ndarray, size: int) -> bool:
    """Whether every element of integer array ``indices`` is in ``[0, size)``.

    One pass: seen as unsigned, a negative index is at least ``2**(bits-1)``,
    beyond any size up to the dtype's maximum (a larger size holds every
    non-negative index: only the sign is checked).
    """
    signed = _UNSIGNED.get(indices.dtype)
    if signed is None:  # unsigned, or another byte order
        low = int(indices.min()) if indices.dtype.kind == "i" else 0
        return low >= 0 and int(indices.max()) < size
    largest, unsigned = signed
    if size > largest:
        return int(indices.min()) >= 0
    return int(indices.view(unsigned).max()) < size


def indptr_of_sorted(major: np.ndarray, size: int, dtype: np.dtype[Any]) -> np.ndarray:
    """Positions (``size + 1`` of ``dtype``) of ascending major indices ``major``.

    Memory: the result plus O(len(major)); the prefix sum runs in place.
    """
    ptr = np.zeros(size + 1, dtype)
    n = major.shape[0]
    if n:
        starts = np.flatnonzero(np.concatenate(([True], major[1:] != major[:-1])))
        ptr[major[starts] + 1] = np.diff(np.append(starts, n))
    np.cumsum(ptr, out=ptr)
    return ptr


def compressed_from_coo(
    coo: Any, kind: str, dtypes: tuple[np.dtype[Any], np.dtype[Any]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of duplicate-free scipy COO ``coo`` as ``kind`` (csr or csc).

    Sorts the entries by (major, minor) unless they already are, so it
    costs O(nnz log nnz) time and O(nnz) memory beyond the positions: the
    conversion for matrices with more rows (columns) than entries, where a
    counting sort's O(dimension) tables would dominate.
    """
    rows, cols = np.asarray(coo.row), np.asarray(coo.col)
    major, minor = (rows, cols) if kind == "csr" else (cols, rows)
    data = np.asarray(coo.data)
    for idx, size in ((rows, coo.shape[0]), (cols, coo.shape[1])):
        if idx.shape[0] and not in_range(idx, size):
            raise FormatError(f"invalid scipy matrix: an index is out of range for size {size}")
    if not _lex_sorted(major, minor):
        order = np.lexsort((minor, major))
        major, minor, data = major[order], minor[order], data[order]
    size = coo.shape[0] if kind == "csr" else coo.shape[1]
    pdt, cdt = dtypes
    return indptr_of_sorted(major, size, pdt), minor.astype(cdt), data


def _lex_sorted(major: np.ndarray, minor: np.ndarray) -> bool:
    """Whether the pairs ``(major, minor)`` are strictly ascending (O(nnz))."""
    if major.shape[0] < 2:
        return True
    dmaj = major[1:] - major[:-1]
    return bool(((dmaj > 0) | ((dmaj == 0) & (minor[1:] > minor[:-1]))).all())
