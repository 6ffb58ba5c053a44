"""The host-side sparse tensor: one layout's buffers, or the parts of a composable layout."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats import scipyio
from sparsecomp.formats.bufcheck import check_buffers
from sparsecomp.formats.compose import split_parts
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.names import AnyLayout, parse_layout
from sparsecomp.formats.ordering import duplicate_index, sort_entries, sum_duplicates
from sparsecomp.formats.storage import Storage, allows_duplicates, pack
from sparsecomp.formats.unpack import unpack
from sparsecomp.formats.validate import (
    check_coords,
    check_shape,
    check_value_dtype,
    check_values,
)


def _locked(buf: np.ndarray | None) -> np.ndarray | None:
    """A read-only view of a read-only ``buf``: numpy refuses to make such a view
    writable again (``setflags(write=True)``), so calls that checked the buffer once
    can trust it (an index edited after a first call was read out of bounds)."""
    if buf is None:
        return None
    base = buf.base
    if not buf.flags.writeable and isinstance(base, np.ndarray) and not base.flags.writeable:
        return buf  # locked already (a tensor sharing another's structure)
    buf.flags.writeable = False
    return buf.view()


class SparseTensor:
    """A sparse tensor stored in a :class:`Layout` or split over a :class:`Composable`.

    A single-layout tensor has, per level ``l``, ``positions[l]`` and
    ``coordinates[l]`` (numpy arrays of the layout's signed ``pos_width`` /
    ``crd_width`` ints, or None where the level format has no such buffer)
    and ``values``, one per last-level position; the storage scheme is
    described in :mod:`sparsecomp.formats.storage`. A composable tensor has
    ``parts``: one single-layout tensor of the full shape per part, holding
    the nonzeros its rule selects (:mod:`sparsecomp.formats.compose`).

    Construct with :meth:`from_scipy`, :meth:`from_dense`, :meth:`from_coo`
    or :meth:`from_buffers`; ``layout`` arguments take a short name
    (``"csr"``, ``"bsr:16x16"``, ``"hyb"``...), ``#sparse_iter`` attribute
    text, or a :class:`Layout`/:class:`Composable`. Input order never matters;
    duplicate coordinates are an error unless the layout's last level is
    nonunique. NaN values are stored like any nonzero (``from_dense`` keeps
    them; unpacking never drops them).

    Explicit zeros: *exact-structure* layouts (below leading ``dense_fixed``
    levels, only compressed, ELL, loose_compressed and singleton levels:
    ``csr``, ``csc``, ``coo``, ``dcsr``, ``ell``) keep explicitly stored zeros
    through every round trip. Layouts that store dense blocks,
    ``dense_varied`` prefixes or n:m slots cannot tell fill from an explicit
    zero, and drop zero values when unpacking.

    ``to_scipy`` returns float16 values as float32 (scipy.sparse has no
    float16). Tensors are immutable by convention, and their index buffers
    (positions, coordinates) are read-only numpy arrays: compiled kernels
    trust them, and a call remembers a tensor it has checked. Values stay
    writable (no value can make a kernel read out of bounds). Constructors
    copy their inputs, except that ``from_scipy(..., copy=False)`` may share
    scipy's arrays: such a tensor is ``shared``, its index buffers stay the
    caller's (writable) and every call validates them again (:meth:`recheck`).
    :meth:`buffers` returns the tensor's own arrays; :meth:`with_values`
    shares the index arrays; ``to(self.layout)`` returns ``self``.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        layout: AnyLayout,
        dtype: np.dtype[Any],
        storage: Storage | None = None,
        parts: tuple[SparseTensor, ...] = (),
        *,
        shared: bool = False,
        checked: bool = False,
    ) -> None:
        """Wrap storage; the ``from_*`` constructors validate theirs and are the ones
        to use. ``checked``: the storage was validated (the constructors' own calls);
        an unchecked tensor is validated at its first call or conversion
        (:meth:`recheck`): a hand-built one with a coordinate out of range made a
        kernel read out of bounds.

        ``shared``: some index buffer belongs to the caller, who may still
        change it; else every index buffer is made read-only.
        """
        if storage is not None and not shared:
            storage = dataclasses.replace(
                storage,
                positions=tuple(_locked(b) for b in storage.positions),
                coordinates=tuple(_locked(b) for b in storage.coordinates),
            )
        self.shape = shape
        self.layout = layout
        self.dtype = dtype
        self._storage = storage
        self.parts = parts
        self._nnz: int | None = None
        self.shared = shared
        self._checked = checked
        #: what the tensor was made from, where a message should name that instead
        #: (``sparsecomp.torch`` sets "a torch.sparse COO tensor"); None: itself
        self.origin: str | None = None

    @property
    def checked(self) -> bool:
        """Whether the index buffers were validated (a ``from_*`` constructor, or
        :meth:`recheck` of read-only ones, which cannot have changed since)."""
        if self._storage is None:
            return all(p.checked for p in self.parts)
        return self._checked

    # -- construction ----------------------------------------------------------
    @classmethod
    def from_coo(
        cls, shape: Sequence[int], coords: Any, values: Any, layout: str | AnyLayout
    ) -> SparseTensor:
        """Pack entries: ``coords`` ``(ndim, nnz)`` integers, ``values`` ``(nnz,)``."""
        dims = check_shape(shape)
        lay = _resolve(layout, len(dims))
        crds = check_coords(dims, coords)
        vals = check_values(values, crds.shape[1])
        return cls._build(dims, lay, crds, vals)

    @classmethod
    def from_dense(cls, array: Any, layout: str | AnyLayout) -> SparseTensor:
        """Pack the nonzeros of a dense array of any rank >= 1 (NaN counts as nonzero)."""
        arr = np.asarray(array)
        check_value_dtype(arr.dtype)
        if arr.ndim == 0:
            raise FormatError("from_dense needs an array of rank >= 1, got a scalar")
        lay = _resolve(layout, arr.ndim)
        nz = np.nonzero(arr)
        return cls._build(arr.shape, lay, np.stack(nz).astype(np.int64), arr[nz])

    @classmethod
    def from_scipy(
        cls, m: Any, layout: str | AnyLayout = "csr", *, copy: bool = True
    ) -> SparseTensor:
        """Pack a scipy.sparse matrix or array; explicit zeros are kept as entries.

        A 1-D array (scipy's sparse vectors: ``coo_array``, ``dok_array`` of one
        dimension) is packed from its coordinates, in a rank-1 layout.

        Duplicate entries are summed, as scipy means them (on a copy: ``m``
        is never changed).

        A canonical CSR (CSC) input in a ``csr`` (``csc``) layout is converted
        without sorting; with ``copy=False`` its arrays are shared when their
        dtypes already match the layout's widths. Other canonical scipy inputs
        reach ``csr``/``csc`` layouts through scipy's own conversion.
        """
        if scipyio.issparse(m) and m.ndim == 1:
            vector = m.tocoo(copy=True)
            vector.sum_duplicates()
            return cls.from_coo(vector.shape, np.asarray(vector.coords), vector.data, layout)
        given = scipyio.check_matrix(m)
        m = scipyio.summed(given)
        shape = check_shape(m.shape)
        lay = _resolve(layout, 2)
        if isinstance(lay, Layout):
            storage = (
                scipyio.compressed_storage(m, lay, copy)
                or scipyio.coo_storage(m, lay)
                or scipyio.bsr_storage(m, lay)
            )
            if storage is not None:
                shared = not copy and m is given and scipyio.shares_indices(storage, m)
                return cls(shape, lay, storage.values.dtype, storage, shared=shared, checked=True)
        coords, values = scipyio.coo_entries(m)
        return cls._build(shape, lay, check_coords(shape, coords), values)

    @classmethod
    def from_buffers(
        cls,
        shape: Sequence[int],
        layout: str | Layout,
        positions: Sequence[Any],
        coordinates: Sequence[Any],
        values: Any,
    ) -> SparseTensor:
        """Wrap raw level buffers after validating them fully (see :mod:`.bufcheck`).

        ``positions``/``coordinates`` list one array or None per level. The
        buffers are copied. Composable layouts are not accepted.
        """
        dims = check_shape(shape)
        lay = _resolve(layout, len(dims))
        if not isinstance(lay, Layout):
            raise FormatError("from_buffers takes a single layout, not a composable one")
        storage = check_buffers(lay, dims, positions, coordinates, values)
        return cls(dims, lay, storage.values.dtype, storage, checked=True)

    @classmethod
    def _build(
        cls, shape: tuple[int, ...], layout: AnyLayout, coords: np.ndarray, values: np.ndarray
    ) -> SparseTensor:
        dtype = check_value_dtype(values.dtype)
        if isinstance(layout, Layout):
            return cls(shape, layout, dtype, pack(layout, shape, coords, values), checked=True)
        split = split_parts(layout, shape, coords, values)
        parts = tuple(cls._build(shape, lay, c, v) for lay, c, v in split)
        return cls(shape, layout, dtype, None, parts, checked=True)

    # -- buffers ---------------------------------------------------------------
    def _single(self, what: str) -> Storage:
        if self._storage is None:
            raise FormatError(f"a composable tensor has no {what} of its own; see .parts")
        return self._storage

    @property
    def positions(self) -> tuple[np.ndarray | None, ...]:
        """Per level its positions buffer, or None (single layouts only)."""
        return self._single("positions").positions

    @property
    def coordinates(self) -> tuple[np.ndarray | None, ...]:
        """Per level its coordinates buffer, or None (single layouts only)."""
        return self._single("coordinates").coordinates

    @property
    def values(self) -> np.ndarray:
        """The values buffer, one per last-level position (single layouts only)."""
        return self._single("values").values

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nse(self) -> int:
        """Stored entries, padding and fill included (all parts together)."""
        if self._storage is None:
            return sum(p.nse for p in self.parts)
        return int(self._storage.values.shape[0])

    @property
    def nnz(self) -> int:
        """Logical entries: stored entries less padding (and, for inexact layouts, zeros)."""
        if self._nnz is None:
            parts = sum(p.nnz for p in self.parts)
            self._nnz = parts if self._storage is None else int(self._entries()[1].shape[0])
        return self._nnz

    def buffers(self) -> list[tuple[str, np.ndarray]]:
        """The tensor's own arrays, by name, in the runtime's canonical order.

        Per level ``l`` in order: ``pos{l}`` then ``crd{l}`` for the buffers it
        has, then ``values``. Composable tensors list each part's buffers in
        part order, prefixed ``part{i}.``.
        """
        if self._storage is None:
            return [(f"part{i}.{n}", a) for i, p in enumerate(self.parts) for n, a in p.buffers()]
        out = []
        for lvl, (pos, crd) in enumerate(zip(self.positions, self.coordinates, strict=True)):
            out += [(f"pos{lvl}", pos)] if pos is not None else []
            out += [(f"crd{lvl}", crd)] if crd is not None else []
        return [*out, ("values", self.values)]

    @property
    def storage_bytes(self) -> int:
        """Bytes of all the tensor's buffers; ``formats.storage_bytes`` predicts it unpacked."""
        return sum(int(a.nbytes) for _, a in self.buffers())

    def with_values(self, values: Any, *, copy: bool = True) -> SparseTensor:
        """The same index structure (shared arrays) with a copy of ``values`` (``nse`` long).

        For a composable tensor ``values`` is the parts' values concatenated in
        part order. ``copy=False`` keeps ``values`` itself where it is already a
        1-D contiguous numpy array of a value dtype (``sparsecomp.torch`` passes a
        parameter's memory this way): the tensor then changes with it.
        """
        vals = check_values(values, self.nse)
        if copy or not (isinstance(vals, np.ndarray) and vals.flags.c_contiguous):
            vals = np.array(vals)
        if self._storage is None:
            cuts = np.cumsum([p.nse for p in self.parts])[:-1]
            parts = tuple(
                p.with_values(v, copy=copy)
                for p, v in zip(self.parts, np.split(vals, cuts), strict=True)
            )
            return SparseTensor(self.shape, self.layout, vals.dtype, None, parts)
        st = self._storage
        storage = Storage(st.positions, st.coordinates, vals)
        return SparseTensor(
            self.shape, self.layout, vals.dtype, storage, shared=self.shared, checked=self._checked
        )

    def astype(self, dtype: Any) -> SparseTensor:
        """The same index structure with the values converted to ``dtype`` (numpy's
        rules): an ``f16`` kernel's operand from scipy, which holds no float16,
        is ``SparseTensor.from_scipy(A, "csr").astype(np.float16)``."""
        if self._storage is None:
            values: Any = (
                np.concatenate([p.values.ravel() for p in self.parts]) if self.parts else []
            )
        else:
            values = self.values
        return self.with_values(np.asarray(values).astype(dtype))

    def recheck(self) -> None:
        """Validate index buffers that may have changed since construction, and those
        of a tensor built without the ``from_*`` constructors (once).

        Only writable index buffers can change: those of a ``shared`` tensor
        (any other's are read-only views that numpy will not make writable). Calls
        and conversions run this before reading such a tensor's buffers or handing
        them to native code; it raises :class:`FormatError` where
        :meth:`from_buffers` would.
        """
        if self._storage is None:
            for part in self.parts:
                part.recheck()
            return
        st = self._storage
        indices = (*st.positions, *st.coordinates)
        writable = any(b is not None and b.flags.writeable for b in indices)
        if self._checked and not writable:
            return
        assert isinstance(self.layout, Layout)
        if not scipyio.recheck_compressed(self.shape, self.layout, st):
            check_buffers(self.layout, self.shape, st.positions, st.coordinates, st.values)
        self._checked = not writable  # read-only buffers stay as checked

    # -- unpacking -------------------------------------------------------------
    def _entries(self) -> tuple[np.ndarray, np.ndarray]:
        self.recheck()  # a shared or hand-built tensor's buffers, before they are read
        if self._storage is not None:
            assert isinstance(self.layout, Layout)
            return unpack(self.layout, self.shape, self._storage)
        got = [p._entries() for p in self.parts]
        return np.concatenate([c for c, _ in got], axis=1), np.concatenate([v for _, v in got])

    def to_coo(self) -> tuple[np.ndarray, np.ndarray]:
        """``(coords (ndim, nnz) int64, values)``, new arrays sorted row-major."""
        coords, vals = self._entries()
        order, _ = sort_entries(coords, self.shape)
        return (coords, vals) if order is None else (coords[:, order], vals[order])

    def to_dense(self) -> np.ndarray:
        """A new dense array (duplicates of nonunique layouts are summed)."""
        out = np.zeros(self.shape, self.dtype)
        coords, vals = self._entries()
        if self._repeats:
            np.add.at(out, tuple(coords), vals)
        else:
            out[tuple(coords)] = vals
        return out

    def to_scipy(self, format: str = "csr") -> Any:
        """A new scipy.sparse ``coo_array``, ``csr_array`` or ``csc_array`` (matrices only).

        scipy.sparse has no float16: such values come back as float32 (exactly).
        """
        if self.ndim != 2:
            raise FormatError(f"to_scipy needs a matrix, the tensor has shape {self.shape}")
        if format not in ("coo", "csr", "csc"):
            raise FormatError(f"unknown scipy format '{format}'; expected coo, csr or csc")
        if self._storage is not None and scipyio.compressed_kind(self.layout):
            assert isinstance(self.layout, Layout)
            return scipyio.compressed_matrix(self.shape, self.layout, self._storage).asformat(
                format
            )
        coords, vals = self.to_coo()
        return scipyio.matrix_from_coo(self.shape, coords, vals, format)

    def to(self, layout: str | AnyLayout) -> SparseTensor:
        """This tensor in another layout (``self`` if it is already in ``layout``).

        Duplicates of a nonunique source are summed when the target is unique.
        """
        lay = _resolve(layout, self.ndim)
        if lay == self.layout:
            return self
        coords, vals = self._entries()
        if self._repeats and not (isinstance(lay, Layout) and allows_duplicates(lay)):
            coords, vals = sum_duplicates(coords, vals, self.shape)
        return SparseTensor._build(self.shape, lay, coords, vals)

    def summed(self) -> SparseTensor:
        """This tensor with the values of repeated coordinates added up (``self`` if none).

        The value of a tensor in a nonunique layout is the sum of its
        duplicates (as in scipy); compiled kernels are only exact on
        tensors without them, so calls pass arguments through this first.
        """
        if self._storage is None:
            parts = tuple(p.summed() for p in self.parts)
            if all(a is b for a, b in zip(parts, self.parts, strict=True)):
                return self
            return SparseTensor(self.shape, self.layout, self.dtype, None, parts)
        if not self._repeats:
            return self
        coords, vals = self._entries()
        order, key = sort_entries(coords, self.shape)
        if duplicate_index(coords if order is None else coords[:, order], key) is None:
            return self
        assert isinstance(self.layout, Layout)
        coords, vals = sum_duplicates(coords, vals, self.shape)
        packed = pack(self.layout, self.shape, coords, vals)
        return SparseTensor(self.shape, self.layout, self.dtype, packed, checked=True)

    @property
    def _repeats(self) -> bool:
        """Whether the layout may hold equal coordinates more than once."""
        return isinstance(self.layout, Layout) and allows_duplicates(self.layout)

    def __repr__(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        parts = f", {len(self.parts)} parts" if self.parts else ""
        return f"SparseTensor({dims} {self.dtype} {self.layout}{parts}, nse={self.nse})"


def _resolve(layout: str | AnyLayout, rank: int) -> AnyLayout:
    lay = parse_layout(layout, rank)
    if lay.rank != rank:
        raise FormatError(f"layout {lay} has rank {lay.rank}, but the tensor has {rank} dimensions")
    return lay
