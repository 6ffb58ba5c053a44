"""Freed GPU memory kept for the next allocation of its kind and size, as CuPy's pool does.

Every call of a CUDA executable allocates its results (and copies of host
operands) and frees them when they die. Straight through the driver each
allocation costs a ``cuMemAlloc*`` and each free a ``cuMemFree``, which
waits for the device; and fresh managed memory has no pages on the GPU yet,
so the first kernel to write it stalls on page faults (measured on an H100:
SpMV on R-MAT 2^16 took 345 us in the kernel, cuSPARSE's 12 us). The pool
hands a freed block back to the next request of the same kind (managed or
device) and size class, whose pages the GPU already holds.

:func:`pooled` puts a :class:`Pool` in front of a :class:`DriverTable`'s
``mem_alloc_managed``, ``mem_alloc`` and ``mem_free`` entries (what the
kernels' host code and :mod:`sparsecomp.runtime.cuda` call), so every
allocation of the process goes through it. Sizes round up to 512 bytes, and
above 1 MiB to an eighth of their power of two (at most 12.5% more than
asked). At most :data:`LIMIT` bytes stay cached; past it a free goes to the
driver. An allocation the driver refuses for lack of memory releases the
cache and tries once more. Reuse follows stream order: the kernels run on
the default stream and every call synchronizes before it returns.

Imports no MLIR and no CUDA package.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

#: Bytes the pool keeps cached at most.
LIMIT = 4 << 30
#: ``CUDA_ERROR_OUT_OF_MEMORY``.
OUT_OF_MEMORY = 2

Alloc = Callable[[int], tuple[int, int]]  # bytes -> (CUresult, pointer)
Free = Callable[[int], int]  # pointer -> CUresult


def size_class(nbytes: int) -> int:
    """The bytes a request of ``nbytes`` takes: 512-byte steps, above 1 MiB eighths of
    its power of two."""
    nbytes = max(nbytes, 1)
    if nbytes <= 1 << 20:
        return -(-nbytes // 512) * 512
    step = 1 << (nbytes.bit_length() - 4)  # an eighth of the power of two at or below
    return -(-nbytes // step) * step


class Pool:
    """Blocks freed by the program, by (managed, size class), ready for the next request."""

    def __init__(self, alloc_managed: Alloc, alloc: Alloc, free: Free, limit: int = LIMIT):
        self._alloc = {True: alloc_managed, False: alloc}
        self._free = free
        self.limit = limit
        self._idle: dict[tuple[bool, int], list[int]] = {}
        self._live: dict[int, tuple[bool, int]] = {}
        self.cached = 0  # bytes in idle blocks
        self._lock = threading.Lock()

    def allocate(self, managed: bool, nbytes: int) -> tuple[int, int]:
        """``(CUresult, pointer)`` of a block of at least ``nbytes``."""
        key = (managed, size_class(nbytes))
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                ptr = idle.pop()
                self.cached -= key[1]
                self._live[ptr] = key
                return 0, ptr
        code, ptr = self._alloc[managed](key[1])
        if code == OUT_OF_MEMORY:
            self.release()
            code, ptr = self._alloc[managed](key[1])
        if code == 0:
            with self._lock:
                self._live[ptr] = key
        return code, ptr

    def free(self, ptr: int) -> int:
        """Keep ``ptr``'s block for reuse (or free it past the limit); other pointers go
        to the driver as they are."""
        with self._lock:
            key = self._live.pop(ptr, None)
            if key is not None and self.cached + key[1] <= self.limit:
                self._idle.setdefault(key, []).append(ptr)
                self.cached += key[1]
                return 0
        return self._free(ptr)

    def release(self) -> None:
        """Give every idle block back to the driver."""
        with self._lock:
            blocks = [p for idle in self._idle.values() for p in idle]
            self._idle.clear()
            self.cached = 0
        for ptr in blocks:
            self._free(ptr)


def pooled(table: Any, limit: int = LIMIT) -> tuple[Pool, list[Any]]:
    """Route ``table``'s allocation entries (a ``DriverTable``) through a new pool.

    Returns the pool and the callbacks ``table`` now holds (keep them alive as
    long as the table).
    """
    kinds = dict(type(table)._fields_)

    def entry(name: str) -> Any:
        # By address: a field read is a view of the table, which the hooks replace.
        return kinds[name](ctypes.cast(getattr(table, name), ctypes.c_void_p).value)

    raw_managed, raw_alloc, raw_free = (entry(n) for n in ("mem_alloc_managed", "mem_alloc",
                                                           "mem_free"))  # fmt: skip

    def raw(entry: Any, *flags: int) -> Alloc:
        """The driver's allocation ``entry`` as ``bytes -> (CUresult, pointer)``."""

        def call(nbytes: int) -> tuple[int, int]:
            out = ctypes.c_uint64(0)
            code = entry(ctypes.byref(out), nbytes, *flags)
            return int(code), int(out.value)

        return call

    attach_global = 1  # CU_MEM_ATTACH_GLOBAL
    pool = Pool(raw(raw_managed, attach_global), raw(raw_alloc), lambda p: int(raw_free(p)), limit)

    def hook(managed: bool) -> Callable[..., int]:
        """A table entry taking from the pool (``flags`` of the managed one: global)."""

        def give(out: Any, nbytes: int, *flags: int) -> int:
            code, ptr = pool.allocate(managed, nbytes)
            out[0] = ptr
            return code

        return give

    hooks = [
        kinds["mem_alloc_managed"](hook(True)),
        kinds["mem_alloc"](hook(False)),
        kinds["mem_free"](pool.free),
    ]
    table.mem_alloc_managed, table.mem_alloc, table.mem_free = hooks
    return pool, [*hooks, raw_managed, raw_alloc, raw_free]


__all__ = ["LIMIT", "Pool", "pooled", "size_class"]
