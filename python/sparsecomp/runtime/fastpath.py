"""The common case of a call's arguments, in as little Python as possible.

:func:`~sparsecomp.runtime.marshal.flatten` is the careful path: it
converts what it can and raises clear errors for the rest. Most calls need
neither: every argument already is what the ABI wants. :class:`FastArgs`,
built once per signature, recognizes exactly those calls, with the same
checks done against precomputed expectations, and writes their C
parameters and descriptor words directly (see :mod:`.call`):

* dense: a ``numpy.ndarray`` (not a subclass) of the ABI dtype and rank,
  C-contiguous and aligned;
* scalar: a Python ``float`` (float dtypes), an ``int`` in range (integer
  and float dtypes) or a ``bool`` (bool dtype);
* sparse: a :class:`SparseTensor` already in the ABI layout, with the ABI's
  buffer names and dtypes, every buffer C-contiguous and aligned; or a
  canonical scipy CSR (CSC) matrix for a csr (csc) layout with the ABI's
  dtypes, its arrays checked (bounds, O(nnz)) on every call (its positions
  only, O(rows), where the kernel guards its coordinates: ``"guarded"``);
* static sizes and size symbols as the ABI says.

Anything else (a scipy matrix to pack, an array to copy, a layout to
convert, and every error) makes :meth:`FastArgs.emit` return False, and the
call takes the careful path from the start: the fast path never accepts an
argument that path would reject, and never reports an error of its own.

A SparseTensor that passed is remembered (by identity, while it lives)
with its buffers' descriptor words, so that the next call with it checks
nothing again. Only tensors whose index buffers are read-only pass (every
constructor makes them so): a tensor sharing writable arrays with the
caller (``from_scipy(copy=False)``) takes the careful path, which checks
its index buffers again on every call. Values may change between calls.
The cache holds its own references to the buffers, so numpy cannot
reallocate them (``ndarray.resize`` refuses arrays referenced elsewhere)
and the words stay valid for as long as the tensor lives.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.indptr import check_compressed, check_positions
from sparsecomp.formats.scipyio import compressed_kind
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.memref import address, descriptor_words, words_of


class Out:
    """What one call writes: C parameters, descriptor words, argument arrays by address."""

    __slots__ = ("base", "inputs", "keep", "params", "words")

    def __init__(self, base: int, params: list[Any]) -> None:
        self.base = base  # address of the call's word buffer
        self.params = params
        self.words: list[int] = []
        self.inputs: dict[int, np.ndarray] = {}  # data pointer -> array (first one wins)
        self.keep: list[Any] = []  # whatever must outlive the call

    def array(self, array: np.ndarray, addr: int) -> None:
        """Pass ``array`` (at ``addr``) as a pointer to its descriptor."""
        self.params.append(self.base + 8 * len(self.words))
        self.inputs.setdefault(addr, array)
        self.words += words_of(array, addr)


#: One argument: writes its parameters and returns its shape, or None (not fast).
Step = Callable[[Any, Out], "tuple[int, ...] | None"]
_KNOWN_LAYOUTS = 8  # layout objects remembered as equal to the ABI's, per argument


class FastArgs:
    """The fast path for one signature: ``emit(args, out)`` is True when it took the call."""

    def __init__(self, sig: Signature) -> None:
        self.n_args = len(sig.args)
        #: per argument: the SparseTensors that passed (id -> entry), shared with
        #: the C call path (:mod:`.fastcall`); None for other arguments
        self.checked: tuple[dict[int, _Checked] | None, ...] = tuple(
            {} if spec.kind == "sparse" else None for spec in sig.args
        )
        self.steps = tuple(
            _step(spec, checked) for spec, checked in zip(sig.args, self.checked, strict=True)
        )
        self.sizes = SizeChecks(sig)

    def emit(self, args: tuple[Any, ...], out: Out) -> bool:
        """Write the parameters of ``args`` into ``out``; False (``out`` spoiled) if not fast."""
        if len(args) != self.n_args:
            return False
        shapes = []
        for step, value in zip(self.steps, args, strict=True):
            shape = step(value, out)
            if shape is None:
                return False
            shapes.append(shape)
        return self.sizes.agree(shapes)


class SizeChecks:
    """A signature's static sizes and the sizes its symbols tie together, as the fast
    paths check them (:class:`FastArgs`, :mod:`.gpu_fastpath`)."""

    def __init__(self, sig: Signature) -> None:
        static: list[tuple[int, int, int]] = []
        symbols: dict[str, list[tuple[int, int]]] = {}
        for i, spec in enumerate(sig.args):
            for axis, want in enumerate(spec.shape):
                if isinstance(want, int):
                    static.append((i, axis, want))
                elif isinstance(want, str):
                    symbols.setdefault(want, []).append((i, axis))
        self.static = tuple(static)
        groups = [uses for uses in symbols.values() if len(uses) > 1]
        self.symbols = tuple((uses[0], tuple(uses[1:])) for uses in groups)

    def agree(self, shapes: list[tuple[int, ...]]) -> bool:
        """Whether the arguments' ``shapes`` have the static sizes and agree per symbol."""
        for i, axis, want in self.static:
            if shapes[i][axis] != want:
                return False
        for (i0, axis0), others in self.symbols:
            size = shapes[i0][axis0]
            for i, axis in others:
                if shapes[i][axis] != size:
                    return False
        return True


def _step(spec: ArgSpec, checked: dict[int, _Checked] | None) -> Step:
    if spec.kind == "scalar":
        return _scalar_step(spec)
    if spec.kind == "dense":
        return _dense_step(spec)
    assert checked is not None
    return _sparse_step(spec, checked)


def _scalar_step(spec: ArgSpec) -> Step:
    kind = spec.dtype.kind
    if kind == "b":
        accept: Callable[[Any], bool] = lambda v: type(v) is bool  # noqa: E731
    elif kind == "f":  # an int beyond a double's range: the careful path refuses it
        top = int(np.finfo(np.float64).max)
        accept = lambda v: type(v) is float or (type(v) is int and -top <= v <= top)  # noqa: E731
    else:
        info = np.iinfo(spec.dtype)
        lo, hi = int(info.min), int(info.max)
        accept = lambda v: type(v) is int and lo <= v <= hi  # noqa: E731
    as_int = kind == "b"
    sized = bool(spec.shape)  # an index argument that sizes a loop: its value is a size

    def scalar(value: Any, out: Out) -> tuple[int, ...] | None:
        if not accept(value):
            return None
        out.params.append(int(value) if as_int else value)
        return (value,) if sized else ()

    return scalar


def _dense_step(spec: ArgSpec) -> Step:
    dtype, rank = spec.dtype, spec.rank

    def dense(value: Any, out: Out) -> tuple[int, ...] | None:
        if type(value) is not np.ndarray or value.dtype != dtype or value.ndim != rank:
            return None
        flags = value.flags
        if not (flags.c_contiguous and flags.aligned):
            return None
        out.array(value, address(value))
        return value.shape

    return dense


class _Checked:
    """A tensor that passed: its descriptor words (also packed, ``blob``), buffers by
    address, and sizes."""

    __slots__ = ("blob", "inputs", "ref", "shape", "words")

    def __init__(
        self, ref: weakref.ref[SparseTensor], buffers: list[np.ndarray], shape: tuple[int, ...]
    ) -> None:
        self.ref = ref
        self.inputs = [(address(a), a) for a in buffers]  # holds the buffers
        self.words = tuple(w for addr, a in self.inputs for w in words_of(a, addr))
        self.blob = struct.pack(f"={len(self.words)}q", *self.words)
        self.shape = shape


def _scipy_step(spec: ArgSpec) -> Step | None:
    """The step for a canonical scipy CSR (CSC) matrix into a csr (csc) layout of its exact
    dtypes: its three arrays go in as they are, checked (O(nnz)) on every call, since
    the caller may have changed them. None for other layouts."""
    kind = compressed_kind(spec.layout)
    names = tuple(name for name, _ in spec.buffers)
    if kind is None or names != ("pos1", "crd1", "values"):
        return None
    pos_dt, crd_dt, val_dt = (dt for _, dt in spec.buffers)
    guarded = spec.guarded

    def scipy(value: Any, out: Out) -> tuple[int, ...] | None:
        if getattr(value, "format", None) != kind or not hasattr(value, "indptr"):
            return None
        indptr, indices, data = value.indptr, value.indices, value.data
        if type(indptr) is not np.ndarray or type(indices) is not np.ndarray:
            return None
        if type(data) is not np.ndarray or data.dtype != val_dt:
            return None
        if indptr.dtype != pos_dt or indices.dtype != crd_dt or indptr.ndim != 1:
            return None
        nnz = indices.shape[0]
        if data.shape != (nnz,) or not value.has_canonical_format:
            return None
        for array in (indptr, indices, data):
            flags = array.flags
            if not (flags.c_contiguous and flags.aligned):
                return None
        shape = value.shape
        major, minor = shape if kind == "csr" else shape[::-1]
        try:
            if guarded:  # the kernel checks every coordinate it reads
                check_positions("", major, indptr, nnz)
                if minor == 0 and nnz:  # its clamped reads would read element 0
                    return None
            else:
                check_compressed("", (major, minor), indptr, indices)
        except FormatError:
            return None  # the careful path says what is wrong
        for array in (indptr, indices, data):
            out.array(array, address(array))
        out.params += shape
        return (int(shape[0]), int(shape[1]))

    return scipy


def _sparse_step(spec: ArgSpec, checked: dict[int, _Checked]) -> Step:
    dtype, rank, layout, blocks = spec.dtype, spec.rank, spec.layout, spec.blocks
    names = tuple(name for name, _ in spec.buffers)
    dtypes = tuple(dt for _, dt in spec.buffers)
    offsets = tuple(8 * descriptor_words(1) * k for k in range(len(names)))
    known: list[Any] = [layout]  # strong references: their ids cannot be reused

    def same_layout(other: Any) -> bool:
        for lay in known:
            if other is lay:
                return True
        if other != layout:
            return False
        if len(known) < _KNOWN_LAYOUTS:
            known.append(other)
        return True

    def check(value: SparseTensor) -> _Checked | None:
        if value.dtype != dtype or len(value.shape) != rank or not same_layout(value.layout):
            return None
        if not value.checked:
            return None  # built by hand: the careful path validates it (once)
        buffers = value.buffers()
        if len(buffers) != len(names):
            return None
        for (name, array), want, want_dtype in zip(buffers, names, dtypes, strict=True):
            if name != want or type(array) is not np.ndarray or array.dtype != want_dtype:
                return None
            flags = array.flags
            if array.ndim != 1:
                return None
            if not (flags.c_contiguous and flags.aligned):
                return None
            if flags.writeable and name != "values" and not name.endswith(".values"):
                return None  # an index buffer that may change: checked on every call
        if value.summed() is not value:
            return None  # repeated coordinates: the careful path sums them
        if any(size % block for size, block in zip(value.shape, blocks, strict=False)):
            return None  # not whole blocks: the careful path says so
        key = id(value)
        ref = weakref.ref(value, lambda _: checked.pop(key, None))
        return _Checked(ref, [a for _, a in buffers], tuple(value.shape))

    scipy = _scipy_step(spec)

    def sparse(value: Any, out: Out) -> tuple[int, ...] | None:
        if type(value) is not SparseTensor:
            return scipy(value, out) if scipy is not None else None
        entry = checked.get(id(value))
        if entry is None or entry.ref() is not value:
            entry = check(value)
            if entry is None:
                return None
            checked[id(value)] = entry
        at = out.base + 8 * len(out.words)
        out.params += [at + off for off in offsets]
        out.params += entry.shape
        out.words += entry.words
        for addr, array in entry.inputs:
            out.inputs.setdefault(addr, array)
        return entry.shape

    return sparse
