"""Ranked memref descriptors as ctypes structs, and numpy arrays over them.

MLIR lowers a ``memref<? x ... x T>`` of rank ``R`` to the C struct
``{T* allocated; T* aligned; int64 offset; int64 sizes[R]; int64 strides[R]}``
(rank 0 stops after ``offset``); sizes and strides count elements. The
layout does not depend on ``T``, so one struct type per rank serves every
element type.

Arrays go in without copies (:func:`descriptor_of`: the caller keeps the
array alive during the call) and come back without copies
(:func:`array_over`: the new array's ``base`` keeps the memory's owner
alive). Memory a kernel allocated is owned by a :class:`Malloced`, which
frees it with libc ``free`` exactly once, when the last array over it dies.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import weakref
from typing import Any

import numpy as np

# memref.get_global lowers to a descriptor whose allocated pointer is this
# marker: the data is a constant inside the kernel library, never freed.
GLOBAL_MARKER = 0xDEADBEEF


@functools.cache
def descriptor_type(rank: int) -> type[ctypes.Structure]:
    """The ctypes struct of a rank-``rank`` memref descriptor (cached per rank)."""
    fields: list[tuple[str, Any]] = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})


def descriptor_of(array: np.ndarray) -> ctypes.Structure:
    """A descriptor over ``array``'s memory (C-contiguous and aligned; not copied)."""
    assert array.flags.c_contiguous, "the caller makes arrays C-contiguous"
    assert array.flags.aligned, "the caller makes arrays aligned"
    desc = descriptor_type(array.ndim)()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    if array.ndim:
        desc.sizes[:] = array.shape
        desc.strides[:] = [s // array.itemsize for s in array.strides]
    return desc


def pointer(desc: ctypes.Structure) -> int:
    """The allocated pointer of a descriptor, as an int (0 for NULL)."""
    return int(desc.allocated or 0)


def shape_of(desc: ctypes.Structure, rank: int) -> tuple[int, ...]:
    """The sizes of a rank-``rank`` descriptor."""
    return tuple(int(s) for s in desc.sizes) if rank else ()


def array_over(desc: ctypes.Structure, rank: int, dtype: np.dtype[Any], base: object) -> np.ndarray:
    """A numpy array over the memory ``desc`` describes; ``base`` keeps that memory alive.

    Empty results get fresh (empty) arrays, so a NULL pointer never reaches numpy.
    """
    shape = shape_of(desc, rank)
    if 0 in shape:
        return np.empty(shape, dtype)
    item = dtype.itemsize
    strides = tuple(int(s) * item for s in desc.strides) if rank else ()
    iface = {
        "version": 3,
        "shape": shape,
        "strides": strides,
        "typestr": dtype.str,
        "data": (int(desc.aligned) + int(desc.offset) * item, False),
    }
    return np.asarray(_Interface(iface, base))


class _Interface:
    """Exposes a raw buffer to numpy; holds ``base`` for as long as the array lives."""

    def __init__(self, interface: dict[str, Any], base: object) -> None:
        self.__array_interface__ = interface
        self.base = base


@functools.cache
def _libc() -> ctypes.CDLL:
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None
    return libc


def free(address: int) -> None:
    """libc ``free`` (the allocator MLIR's lowered ``memref.alloc`` calls ``malloc`` from)."""
    _libc().free(address)


class Malloced:
    """Owns one block a kernel ``malloc``-ed; frees it once, when this object dies.

    Arrays over the block hold this object (via their ``base``), so the
    block outlives every view of it. :attr:`freed` tells whether it is gone.
    """

    def __init__(self, address: int) -> None:
        self.address = address
        self._finalizer = weakref.finalize(self, _release, address)

    @property
    def freed(self) -> bool:
        return not self._finalizer.alive

    def __repr__(self) -> str:
        return f"Malloced(0x{self.address:x})"


def _release(address: int) -> None:
    free(address)
