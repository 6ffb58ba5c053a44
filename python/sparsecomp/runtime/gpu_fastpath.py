"""The common case of a GPU call's arguments, in as little Python as possible.

A call of a ``cuda:sm_XX`` function whose arguments are all on the GPU
already (:class:`~sparsecomp.runtime.device_arrays.DeviceTensor` operands in
the ABI's layout and dtype, dense arrays with ``__cuda_array_interface__``
of the ABI's dtype and rank, C-contiguous) and Python numbers needs none of
:func:`~sparsecomp.runtime.marshal.flatten`'s conversions: :class:`GpuFastArgs`,
built once per signature, writes its C parameters and descriptor words
directly, the same ones the careful path writes (a test compares them), and
declines anything else (a host array to copy, a DLPack-only array, a
mismatch, which the careful path then reports): it never raises.

A DeviceTensor that passed is remembered (by identity, while it lives) with
its buffers' descriptor words.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.device_arrays import DeviceTensor
from sparsecomp.runtime.fastpath import Out, SizeChecks


class GpuFastArgs:
    """The fast path for one signature's GPU calls: ``emit(args, out)``."""

    def __init__(self, sig: Signature) -> None:
        self.specs = tuple(sig.args)
        self.n_args = len(sig.args)
        #: per sparse argument: DeviceTensors that passed, id -> (ref, words, pointers)
        self._tensors: tuple[dict[int, Any], ...] = tuple({} for _ in sig.args)
        self._dense = tuple((s.dtype.str, s.rank, s.dtype.itemsize) for s in sig.args)
        self.sizes = SizeChecks(sig)

    def emit(self, args: tuple[Any, ...], out: Out, theirs: set[int]) -> Any:
        """Write ``args``' parameters into ``out`` and the caller's GPU pointers into
        ``theirs``; the first dense GPU argument (what results are made like), or None
        (``out`` spoiled) where the careful path must take the call."""
        if len(args) != self.n_args:
            return None
        first = None
        shapes: list[tuple[int, ...]] = []
        for i, (spec, value) in enumerate(zip(self.specs, args, strict=True)):
            kind = spec.kind
            if kind == "sparse":
                if type(value) is not DeviceTensor:
                    return None
                shape = self._sparse(i, spec, value, out, theirs)
            elif kind == "dense":
                iface = getattr(value, "__cuda_array_interface__", None)
                if type(iface) is not dict:
                    return None
                shape = self._array(i, iface, out, theirs)
                if first is None:
                    first = value
            else:
                shape = _scalar(spec, value, out)
            if shape is None:
                return None
            shapes.append(shape)
        return first if self.sizes.agree(shapes) else None

    def _sparse(self, i: int, spec: ArgSpec, value: DeviceTensor, out: Out,
                theirs: set[int]) -> tuple[int, ...] | None:  # fmt: skip
        known = self._tensors[i]
        entry = known.get(id(value))
        if entry is None or entry[0]() is not value:
            if value.layout != spec.layout or value.dtype != spec.dtype:
                return None
            words = [[ptr, ptr, 0, length, 1] for *_, length, ptr in value.buffers]
            pointers = [ptr for *_, ptr in value.buffers]
            entry = (weakref.ref(value, _forget(known, id(value))), words, pointers)
            known[id(value)] = entry
        _, words, pointers = entry
        for descriptor in words:
            out.params.append(out.base + 8 * len(out.words))
            out.words += descriptor
        theirs.update(pointers)
        shape: tuple[int, ...] = value.shape
        out.params += shape
        return shape

    def _array(self, i: int, iface: dict[str, Any], out: Out,
               theirs: set[int]) -> tuple[int, ...] | None:  # fmt: skip
        typestr, rank, itemsize = self._dense[i]
        if iface.get("typestr") != typestr:
            return None
        shape = tuple(iface["shape"])
        if len(shape) != rank or 0 in shape:  # empty arrays: the careful path
            return None
        strides = _contiguous(shape)
        given = iface.get("strides")
        if given is not None and tuple(given) != tuple(s * itemsize for s in strides):
            return None
        ptr = int(iface["data"][0] or 0)
        out.params.append(out.base + 8 * len(out.words))
        out.words += [ptr, ptr, 0, *shape, *strides]
        theirs.add(ptr)
        return shape


def _forget(known: dict[int, Any], key: int) -> Any:
    """The weakref callback that drops ``known[key]`` when its tensor dies."""

    def drop(_: Any) -> None:
        known.pop(key, None)

    return drop


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides in elements, as :func:`~sparsecomp.runtime.memref.words_of`
    writes them."""
    strides = [1] * len(shape)
    for axis in range(len(shape) - 1, 0, -1):
        strides[axis - 1] = strides[axis] * shape[axis]
    return tuple(strides)


def _scalar(spec: ArgSpec, value: Any, out: Out) -> tuple[int, ...] | None:
    """A Python number the careful path would take as it is; its shape, or None."""
    kind = spec.dtype.kind
    if kind == "f":
        if type(value) is not float:
            return None
    elif kind in "iu":
        info = np.iinfo(spec.dtype)
        if type(value) is not int or not info.min <= value <= info.max:
            return None
    else:
        return None
    out.params.append(value)
    return (value,) if spec.shape else ()


__all__ = ["GpuFastArgs"]
