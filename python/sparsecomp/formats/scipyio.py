"""scipy.sparse interchange for :class:`~sparsecomp.formats.tensor.SparseTensor`.

CSR and CSC layouts map straight onto scipy's compressed formats: a
canonical scipy CSR (CSC) matrix packs into a ``csr`` (``csc``) layout by
converting its ``indptr``/``indices`` to the layout's widths, without a sort
(other canonical inputs are converted by scipy first). ``bsr:RxC`` layouts
use scipy's ``tobsr`` when the blocks divide the shape, and ``coo`` from a
canonical CSR expands the rows without sorting. Everything else goes through
COO entries.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.dimmap import DimMap
from sparsecomp.formats.indptr import check_compressed, compressed_from_coo, in_range
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.levels import Level
from sparsecomp.formats.storage import Storage
from sparsecomp.formats.validate import (
    check_crd_widths,
    check_pos_fits,
    check_value_dtype,
    index_dtype,
)

_COMPRESSED = (Level.parse("dense_fixed"), Level.parse("compressed_varied"))
_BSR = (*_COMPRESSED, Level.parse("dense_fixed"), Level.parse("dense_fixed"))
_MAPS = {"csr": DimMap.identity(2), "csc": DimMap.permutation((1, 0))}
_COO = (Level.parse("compressed_varied(nonunique)"), Level.parse("singleton"))


def compressed_kind(layout: Any) -> str | None:
    """``"csr"`` or ``"csc"`` if ``layout`` is that layout (any widths), else None."""
    if not isinstance(layout, Layout) or layout.levels != _COMPRESSED:
        return None
    for kind, dmap in _MAPS.items():
        if layout.dim_to_lvl == dmap:
            return kind
    return None


_SCIPY_SPARSE: list[Any] = []


def scipy_sparse() -> Any:
    """``scipy.sparse``, imported at first need: the compiler's processes (the compile
    server, the sparsifier's workers, ``sparsecomp-opt``) read layouts and never
    scipy, and its import was a third of theirs (0.2 s each)."""
    if not _SCIPY_SPARSE:
        import scipy.sparse  # type: ignore[import-untyped]

        _SCIPY_SPARSE.append(scipy.sparse)
    return _SCIPY_SPARSE[0]


def issparse(m: Any) -> bool:
    """``scipy.sparse.issparse(m)``, without importing scipy (no scipy.sparse object
    exists before ``scipy.sparse`` is imported)."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(m))


def check_matrix(m: Any) -> Any:
    """``m`` if it is a 2-D scipy.sparse matrix/array with an allowed dtype."""
    if not issparse(m):
        raise FormatError(f"expected a scipy.sparse matrix or array, got {type(m).__name__}")
    if m.ndim != 2:
        raise FormatError(f"expected a 2-D scipy.sparse matrix, got {m.ndim}-D")
    check_value_dtype(m.dtype)
    _check_indices(m)
    if m.format in ("csr", "csc", "bsr") and m.indptr.shape[0]:
        nnz = int(m.indptr[-1])
        if nnz < m.indices.shape[0]:  # unpruned: scipy's own tocoo reads the tail
            m = type(m)((m.data[:nnz], m.indices[:nnz], m.indptr), shape=m.shape, copy=False)
    return m


def _check_indices(m: Any) -> None:
    """Every index of a CSR/CSC/BSR/COO ``m`` in range, its ``indptr`` consistent, before
    anything of scipy's reads them: its own conversions (``tocsc``, ``sum_duplicates``)
    do not check, and wrote out of bounds on a bad index (heap corruption, segfaults)."""
    fmt = m.format
    what = f"invalid scipy {fmt} matrix"
    if fmt in ("csr", "csc", "bsr"):
        indptr, indices = np.asarray(m.indptr), np.asarray(m.indices)
        if fmt == "bsr":
            rows, cols = m.blocksize
            sizes = (m.shape[0] // rows, m.shape[1] // cols)
        else:
            sizes = m.shape if fmt == "csr" else m.shape[::-1]
        nnz = int(indptr[-1]) if indptr.shape[0] else 0
        if not 0 <= nnz <= indices.shape[0]:
            raise FormatError(f"{what}: indptr/indices lengths are inconsistent")
        # scipy does not check data again when it is assigned (A.data = ...); a short
        # one was read past its end (garbage, then a segfault)
        stored = np.asarray(m.data).shape[0] if np.ndim(m.data) else 0
        if stored < nnz:
            raise FormatError(f"{what}: data holds {stored} values where indptr says {nnz} entries")
        check_compressed(what, sizes, indptr, indices[:nnz])
    elif fmt == "coo":
        lengths = {np.asarray(a).shape[0] for a in (m.row, m.col, m.data)}
        if len(lengths) != 1:
            raise FormatError(f"{what}: row, col and data have different lengths")
        for axis, (index, size) in enumerate(zip((m.row, m.col), m.shape, strict=True)):
            index = np.asarray(index)
            if index.size and not in_range(index, size):
                raise FormatError(f"{what}: an index of axis {axis} is out of range ({size})")


def summed(m: Any) -> Any:
    """``m``, or a copy with duplicate entries summed as scipy sums them.

    scipy.sparse matrices may store one coordinate several times and mean
    the sum (``has_canonical_format`` False: COO from repeated ``(i, j)``,
    CSR/CSC/BSR built from raw arrays); the copy is scipy's
    ``sum_duplicates`` (sorted indices, explicit zeros kept). ``m`` itself
    is never changed. Formats without the flag (DOK, LIL, DIA) cannot
    repeat a coordinate once converted and are returned as they are.
    """
    if getattr(m, "has_canonical_format", True):
        return m
    out = m.copy()
    out.sum_duplicates()
    return out


def coo_entries(m: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(coords (2, nnz) int64, values)`` of the entries of ``m``, duplicates summed."""
    coo = summed(m.tocoo())
    coords = np.stack([np.asarray(coo.row), np.asarray(coo.col)]).astype(np.int64)
    return coords, np.asarray(coo.data)


def compressed_storage(m: Any, layout: Layout, copy: bool) -> Storage | None:
    """The storage of a canonical scipy CSR/CSC/COO ``m`` (checked by
    :func:`check_matrix`) in a csr/csc layout, else None.

    A canonical matrix of the other format is converted by scipy (an
    O(nnz + dimension) counting sort that keeps explicit zeros), or, when
    the layout's major dimension exceeds the entries, by a sort in O(nnz)
    memory (:mod:`.indptr`). Non-canonical input (unsorted, maybe
    duplicates) returns None, for the general path to check.
    """
    kind = compressed_kind(layout)
    if kind is None or m.format not in ("csr", "csc", "coo") or not m.has_canonical_format:
        return None
    major = m.shape[0] if kind == "csr" else m.shape[1]
    check_crd_widths(layout, layout.dim_to_lvl.level_shape(m.shape))
    pdt, cdt = index_dtype(layout.pos_width), index_dtype(layout.crd_width)
    if m.format != kind and major >= m.nnz:
        check_pos_fits(layout, 1, m.nnz)
        indptr, indices, data = compressed_from_coo(m.tocoo(), kind, (pdt, cdt))
        data = data.copy() if np.may_share_memory(data, m.data) else data
        return Storage((None, indptr), (None, indices), data)
    if m.format != kind:
        m = m.asformat(kind)
    indptr = np.asarray(m.indptr)
    nnz = int(indptr[-1]) if indptr.shape[0] else 0
    indices, data = _first(m.indices, nnz), _first(m.data, nnz)
    check_pos_fits(layout, 1, nnz)  # the indices were checked by check_matrix
    return Storage(
        (None, indptr.astype(pdt, copy=copy)),
        (None, indices.astype(cdt, copy=copy)),
        data.copy() if copy else data,
    )


def shares_indices(storage: Storage, m: Any) -> bool:
    """Whether an index buffer of ``storage`` is memory of scipy matrix ``m``."""
    mine = [b for b in (*storage.positions, *storage.coordinates) if b is not None]
    theirs = [np.asarray(getattr(m, name)) for name in ("indptr", "indices") if hasattr(m, name)]
    return any(np.may_share_memory(a, b) for a in mine for b in theirs)


def recheck_compressed(shape: tuple[int, ...], layout: Layout, storage: Storage) -> bool:
    """Check csr/csc ``storage`` again (:func:`check_compressed`); False for other layouts."""
    kind = compressed_kind(layout)
    pos, crd = storage.positions[1], storage.coordinates[1]
    if kind is None or pos is None or crd is None:
        return False
    major, minor = shape if kind == "csr" else shape[::-1]
    check_compressed(f"the {kind} tensor's index buffers", (major, minor), pos, crd)
    if storage.values.shape[0] != crd.shape[0]:
        raise FormatError(f"the {kind} tensor's values no longer match its coordinates")
    return True


def coo_storage(m: Any, layout: Layout) -> Storage | None:
    """The storage of a canonical scipy CSR ``m`` in the ``coo`` layout: rows expanded, no sort."""
    if layout.levels != _COO or layout.dim_to_lvl != _MAPS["csr"]:
        return None
    if m.format != "csr" or not m.has_canonical_format:
        return None
    indptr = np.asarray(m.indptr)
    nnz = int(indptr[-1])
    check_crd_widths(layout, m.shape)
    check_pos_fits(layout, 0, nnz)
    pdt, cdt = index_dtype(layout.pos_width), index_dtype(layout.crd_width)
    indices = _first(m.indices, nnz)
    rows = m.tocoo().row.astype(cdt)  # scipy expands the rows in O(nnz) memory
    return Storage(
        (np.array([0, nnz], dtype=pdt), None),
        (rows, indices.astype(cdt)),
        _first(m.data, nnz).copy(),
    )


def bsr_storage(m: Any, layout: Layout) -> Storage | None:
    """The storage of canonical scipy ``m`` in a ``bsr:RxC`` layout via scipy's ``tobsr``.

    Only when R and C divide the shape; else None. Explicit zeros are dropped
    first, as :func:`~sparsecomp.formats.storage.pack` does for layouts that
    store dense blocks.
    """
    blocks = layout.dim_to_lvl.block_sizes()
    if layout.levels != _BSR or layout.dim_to_lvl != DimMap.blocked(blocks):
        return None
    if m.format not in ("csr", "csc", "coo") or not m.has_canonical_format:
        return None
    if any(size % b for size, b in zip(m.shape, blocks, strict=True)):
        return None
    if (_first(m.data, m.nnz) == 0).any():
        m = m.tocsr(copy=True)
        m.eliminate_zeros()
    bsr = m.tobsr(blocksize=blocks)
    bsr.sort_indices()
    check_crd_widths(layout, layout.dim_to_lvl.level_shape(m.shape))
    check_pos_fits(layout, 1, bsr.indices.shape[0])
    pdt, cdt = index_dtype(layout.pos_width), index_dtype(layout.crd_width)
    return Storage(
        (None, np.asarray(bsr.indptr).astype(pdt), None, None),
        (None, np.asarray(bsr.indices).astype(cdt), None, None),
        np.ascontiguousarray(bsr.data).reshape(-1),
    )


def _first(arr: Any, n: int) -> np.ndarray:
    """The first ``n`` elements of ``arr``, the array itself when it has exactly ``n``."""
    out = np.asarray(arr)
    return out if out.shape[0] == n else out[:n]


def compressed_matrix(shape: tuple[int, ...], layout: Layout, storage: Storage) -> Any:
    """A scipy csr_array/csc_array copy of a ``csr``/``csc`` layout's storage."""
    pos, crd = storage.positions[1], storage.coordinates[1]
    assert pos is not None
    assert crd is not None
    sp = scipy_sparse()
    cls = sp.csr_array if compressed_kind(layout) == "csr" else sp.csc_array
    vals = scipy_values(storage.values)
    vals = vals.copy() if vals is storage.values else vals
    return cls((vals, crd.copy(), pos.copy()), shape=shape)


def scipy_values(values: np.ndarray) -> np.ndarray:
    """``values`` in a dtype scipy.sparse supports: float16 becomes float32 (exactly)."""
    return values.astype(np.float32) if values.dtype == np.float16 else values


def matrix_from_coo(
    shape: tuple[int, ...], coords: np.ndarray, values: np.ndarray, fmt: str
) -> Any:
    """A scipy array in format ``fmt`` from row-major sorted entries (arrays are reused)."""
    rows, cols = coords
    values = scipy_values(values)
    sp = scipy_sparse()
    if fmt == "coo":
        return sp.coo_array((values, (rows, cols)), shape=shape)
    if fmt == "csr":
        return sp.csr_array((values, cols, _indptr(rows, shape[0])), shape=shape)
    order = np.argsort(cols, kind="stable")  # rows stay ascending within a column
    return sp.csc_array((values[order], rows[order], _indptr(cols[order], shape[1])), shape=shape)


def _indptr(major: np.ndarray, size: int) -> np.ndarray:
    ptr = np.zeros(size + 1, np.int64)
    np.cumsum(np.bincount(major, minlength=size), out=ptr[1:])
    return ptr
