"""Ranked memref descriptors: their C layout, their words, and numpy arrays over them.

MLIR lowers a ``memref<? x ... x T>`` of rank ``R`` to the C struct
``{T* allocated; T* aligned; int64 offset; int64 sizes[R]; int64 strides[R]}``
(rank 0 stops after ``offset``); sizes and strides count elements. Every
field is 8 bytes, so a descriptor is ``3 + 2R`` int64 words whatever ``T``
is: calls write the descriptors of all array arguments into one int64
buffer (:func:`words_of`), and results are read back as words
(:func:`array_from_words`). :func:`descriptor_type` is the same layout as a
ctypes struct, for C signatures.

Arrays go in without copies (the caller keeps them alive during the call)
and come back without copies (the new array's ``base`` keeps the memory's
owner alive). Memory a kernel allocated is owned by a :class:`Malloced`,
which frees it with libc ``free`` exactly once, when the last array over it
dies.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

import numpy as np

# memref.get_global lowers to a descriptor whose allocated pointer is this
# marker: the data is a constant inside the kernel library, never freed.
GLOBAL_MARKER = 0xDEADBEEF

_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


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


def descriptor_words(rank: int) -> int:
    """How many int64 words a rank-``rank`` descriptor takes."""
    return 3 + 2 * rank


def address(array: np.ndarray) -> int:
    """The data pointer of a C-contiguous array.

    ``ctypes.c_char.from_buffer`` reads it through the buffer protocol in a
    fraction of the time ``array.ctypes.data`` takes; read-only and empty
    arrays, which it refuses, go through ``__array_interface__``.
    """
    try:
        return _addressof(_char_from_buffer(array))  # type: ignore[arg-type]
    except (TypeError, ValueError, BufferError):
        return int(array.__array_interface__["data"][0])


def words_of(array: np.ndarray, addr: int) -> tuple[int, ...]:
    """The descriptor of a C-contiguous, aligned ``array`` at ``addr``, as int64 words.

    Strides are the canonical row-major ones (what an identity-layout memref
    of this shape has), also for size-0 and size-1 dimensions.
    """
    shape = array.shape
    if len(shape) == 1:
        return (addr, addr, 0, shape[0], 1)
    strides = [1] * len(shape)
    for axis in range(len(shape) - 1, 0, -1):
        strides[axis - 1] = strides[axis] * shape[axis]
    return (addr, addr, 0, *shape, *strides)


def array_from_words(
    words: tuple[int, ...], rank: int, dtype: np.dtype[Any], base: object
) -> np.ndarray:
    """A numpy array over the memory a descriptor (as words) describes.

    ``base`` keeps that memory alive. Empty results get fresh (empty) arrays,
    so a NULL pointer never reaches numpy.
    """
    item = dtype.itemsize
    data = (words[1] + words[2] * item, False)
    if rank == 1 and words[4] == 1 and words[3]:  # the common case: contiguous, not empty
        iface = {"version": 3, "shape": (words[3],), "typestr": dtype.str, "data": data}
        return np.asarray(_Interface(iface, base))
    shape = words[3 : 3 + rank]
    if 0 in shape:
        return np.empty(shape, dtype)
    iface = {
        "version": 3,
        "shape": shape,
        "strides": tuple(s * item for s in words[3 + rank :]),
        "typestr": dtype.str,
        "data": data,
    }
    return np.asarray(_Interface(iface, base))


def pointer(desc: ctypes.Structure) -> int:
    """The allocated pointer of a descriptor struct, as an int (0 for NULL)."""
    return int(desc.allocated or 0)


class _Interface:
    """Exposes a raw buffer to numpy; holds ``base`` for as long as the array lives."""

    __slots__ = ("__array_interface__", "base")

    def __init__(self, interface: dict[str, Any], base: object) -> None:
        self.__array_interface__ = interface
        self.base = base


def _resolve_free() -> Any:
    """libc ``free``, resolved once at import.

    The process's global symbols (``CDLL(None)``) hold the ``free`` every
    kernel library links against; ``find_library`` is the fallback where
    they do not. Resolving it eagerly matters: a :class:`Malloced` may die
    during interpreter shutdown (garbage in a reference cycle), when nothing
    can be imported or looked up any more.
    """
    try:
        fn = ctypes.CDLL(None).free
    except (OSError, AttributeError):
        name = ctypes.util.find_library("c")
        fn = ctypes.CDLL(name).free
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = None
    return fn


_FREE = _resolve_free()


def free(address: int) -> None:
    """libc ``free`` (the allocator MLIR's lowered ``memref.alloc`` calls ``malloc`` from)."""
    _FREE(address)


class Malloced:
    """Owns one block a kernel ``malloc``-ed; frees it once, when this object dies.

    Arrays over the block hold this object (via their ``base``), so the
    block outlives every view of it. :attr:`freed` tells whether it is gone.
    """

    __slots__ = ("address", "freed")

    #: The function that frees a block: libc ``free``, bound when this module
    #: loads. A class attribute, so ``__del__`` needs no module globals (gone
    #: or None while the interpreter shuts down) and imports nothing.
    release = staticmethod(_FREE)

    def __init__(self, address: int) -> None:
        self.address = address
        self.freed = False

    def __del__(self) -> None:
        if not self.freed:
            self.freed = True
            self.release(self.address)

    def __repr__(self) -> str:
        return f"Malloced(0x{self.address:x})"
