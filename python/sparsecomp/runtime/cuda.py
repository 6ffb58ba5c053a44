"""Running ``cuda:sm_XX`` executables: the CUDA driver through ``cuda-bindings``.

A CUDA ``kernel.so`` holds the host code of every function (grid sizes,
allocations, launches, in MLIR's ``mgpu*`` runtime ABI) with the kernels'
PTX embedded, and ``cuda_shim.c``, which implements that ABI over a table of
driver entry points (:class:`DriverTable`). This module fills the table:

* :func:`driver` initializes the CUDA driver with ``cuda-bindings``
  (``cuInit``, device 0, its primary context) and takes the raw entry points
  (``cuLaunchKernel``, ``cuMemAllocManaged``, ...) from ``cuGetProcAddress``;
  modules are loaded by a Python callback with ``cuModuleLoadData``: the
  saved cubin when the executable has one for this GPU, else the PTX (the
  driver compiles it for the GPU at hand). Its allocations go through a
  caching pool (:mod:`sparsecomp.runtime.device_pool`; :func:`release_cached`
  empties it). Where the driver or the package
  is missing it raises :class:`CudaUnavailableError`, saying which.
* :class:`CudaCaller` runs one function: every host argument buffer is
  copied (``cuMemcpy``) into managed memory (``cuMemAllocManaged``, reachable
  from the host code and the kernels; GPU arrays and :func:`to_device`
  tensors go as they are: their buffers are advised read-mostly and
  prefetched to the GPU once, :meth:`Driver.read_mostly`), the host code
  runs and launches, results are
  copied back into numpy arrays (or stay on the GPU where a GPU array came
  in) and the device memory goes back to the pool. The first failing
  driver call is raised as :class:`CudaError` with its name.

Nothing here imports MLIR: a saved CUDA executable runs wherever
``cuda-bindings`` finds a driver. :func:`use_driver` installs another table
(the tests install a recording fake to check the calls without a GPU).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.runtime import device_arrays, device_pool
from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.call import Caller, _item_specs, item_ranks
from sparsecomp.runtime.fastpath import Out
from sparsecomp.runtime.gpu_fastpath import GpuFastArgs
from sparsecomp.runtime.marshal import flatten
from sparsecomp.runtime.memref import descriptor_words
from sparsecomp.runtime.results import result_array, scalar, unflatten

#: CUDA version whose entry points are requested (12.0: every sm the lowering targets).
CUDA_VERSION = 12000
CU_MEM_ATTACH_GLOBAL = 1

_R = ctypes.c_int  # CUresult
_P = ctypes.c_void_p
_U = ctypes.c_uint
_SIZE = ctypes.c_size_t
LoadModule = ctypes.CFUNCTYPE(_R, ctypes.POINTER(_P), _P, _SIZE)
GetFunction = ctypes.CFUNCTYPE(_R, ctypes.POINTER(_P), _P, ctypes.c_char_p)
LaunchKernel = ctypes.CFUNCTYPE(_R, _P, _U, _U, _U, _U, _U, _U, _U, _P, _P, _P)
StreamSynchronize = ctypes.CFUNCTYPE(_R, _P)
MemAllocManaged = ctypes.CFUNCTYPE(_R, ctypes.POINTER(ctypes.c_uint64), _SIZE, _U)
MemAlloc = ctypes.CFUNCTYPE(_R, ctypes.POINTER(ctypes.c_uint64), _SIZE)
MemFree = ctypes.CFUNCTYPE(_R, ctypes.c_uint64)
Memcpy = ctypes.CFUNCTYPE(_R, ctypes.c_uint64, ctypes.c_uint64, _SIZE)
MemsetD32 = ctypes.CFUNCTYPE(_R, ctypes.c_uint64, _U, _SIZE)
MemsetD16 = ctypes.CFUNCTYPE(_R, ctypes.c_uint64, ctypes.c_ushort, _SIZE)
#: ``cuMemAdvise`` and ``cuMemPrefetchAsync`` as CUDA 12.0 has them (a ``CUdevice``, not
#: a ``CUmemLocation``: :data:`CUDA_VERSION` asks ``cuGetProcAddress`` for that ABI).
MemAdvise = ctypes.CFUNCTYPE(_R, ctypes.c_uint64, _SIZE, ctypes.c_int, ctypes.c_int)
MemPrefetchAsync = ctypes.CFUNCTYPE(_R, ctypes.c_uint64, _SIZE, ctypes.c_int, _P)


class DriverTable(ctypes.Structure):
    """The entry points ``cuda_shim.c`` calls (same order and types as its ``sc_driver``),
    then those only Python calls (the shim copies the first ten; an entry left null is
    skipped where it only advises the driver)."""

    _fields_ = [
        ("load_module", LoadModule),
        ("module_get_function", GetFunction),
        ("launch_kernel", LaunchKernel),
        ("stream_synchronize", StreamSynchronize),
        ("mem_alloc_managed", MemAllocManaged),
        ("mem_alloc", MemAlloc),
        ("mem_free", MemFree),
        ("memcpy", Memcpy),
        ("memset_d32", MemsetD32),
        ("memset_d16", MemsetD16),
        ("mem_advise", MemAdvise),
        ("mem_prefetch_async", MemPrefetchAsync),
    ]


#: (field, driver symbol) for the entries taken from ``cuGetProcAddress``.
_ENTRY_POINTS = (
    ("module_get_function", "cuModuleGetFunction"),
    ("launch_kernel", "cuLaunchKernel"),
    ("stream_synchronize", "cuStreamSynchronize"),
    ("mem_alloc_managed", "cuMemAllocManaged"),
    ("mem_alloc", "cuMemAlloc"),
    ("mem_free", "cuMemFree"),
    ("memcpy", "cuMemcpy"),
    ("memset_d32", "cuMemsetD32"),
    ("memset_d16", "cuMemsetD16"),
    ("mem_advise", "cuMemAdvise"),
    ("mem_prefetch_async", "cuMemPrefetchAsync"),
)
#: Entries a driver may lack (the table keeps them null; :meth:`Driver.read_mostly` skips).
_ADVICE = frozenset({"mem_advise", "mem_prefetch_async"})
#: ``CU_MEM_ADVISE_SET_READ_MOSTLY`` / ``UNSET_READ_MOSTLY``.
ADVISE_READ_MOSTLY, ADVISE_UNSET_READ_MOSTLY = 1, 2


class CudaUnavailableError(SparsecompError):
    """A ``cuda:sm_XX`` executable was called where it cannot run (no driver, GPU or package)."""


class CudaError(SparsecompError):
    """A CUDA driver call failed while a function ran."""


@dataclass
class Driver:
    """A bound driver: the shim's table, the GPU's compute capability, error names."""

    table: DriverTable
    sm: int
    name: str
    error_name: Callable[[int], str] = lambda code: f"CUresult {code}"
    make_current: Callable[[], None] = lambda: None
    #: PTX text -> cubin for this GPU, from executables that saved one.
    cubins: dict[bytes, bytes] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # callbacks and modules the C side holds
    #: The caching pool in front of the allocation entries (:mod:`.device_pool`), if any.
    pool: device_pool.Pool | None = None
    #: Whether buffers are advised read-mostly (the table has the entry and the driver
    #: took the hint so far).
    advise: bool = True

    def __post_init__(self) -> None:
        self.advise = self.advise and bool(self.table.mem_advise)

    def alloc(self, nbytes: int) -> int:
        """Managed memory for ``nbytes`` (at least 1 byte)."""
        ptr = ctypes.c_uint64(0)
        code = self.table.mem_alloc_managed(ctypes.byref(ptr), max(nbytes, 1), CU_MEM_ATTACH_GLOBAL)
        if code != 0:
            raise CudaError(f"cuMemAllocManaged({nbytes}) failed: {self.error_name(code)}")
        return int(ptr.value)

    def free(self, ptr: int) -> None:
        self.table.mem_free(ptr)

    def read_mostly(self, ptr: int, nbytes: int) -> None:
        """Advise the driver that only reads follow at ``ptr`` and move its pages to the
        GPU now: the GPU keeps them, and a host read (a grid size the host code takes
        from the buffer) gets a copy instead of pulling the page back (on an H100, hyb's
        bucket launch took 398-466 us with its buffers plain managed, 7 us so).
        A hint only: where the driver refuses it (a GPU without the attribute), the
        buffers stay plain managed memory and later tensors are not advised either."""
        if not nbytes or not self.advise or not self.table.mem_advise:
            return
        code = self.table.mem_advise(ptr, nbytes, ADVISE_READ_MOSTLY, 0)
        if code == 0 and self.table.mem_prefetch_async:
            code = self.table.mem_prefetch_async(ptr, nbytes, 0, None)
        if code != 0:
            self.advise = False
            _log.info("cuMemAdvise/cuMemPrefetchAsync(%d) failed (%s): device tensors stay "
                      "plain managed memory", nbytes, self.error_name(code))  # fmt: skip

    def free_read_mostly(self, ptr: int, nbytes: int) -> None:
        """Free a block :meth:`read_mostly` advised, the advice taken back first: the pool
        may hand it to a result the GPU writes, where read-mostly pages would be copied
        back and forth (two SpMM cases took 65 and 85 ms so on an H100)."""
        if nbytes and self.table.mem_advise:  # also after a refusal: harmless
            self.table.mem_advise(ptr, nbytes, ADVISE_UNSET_READ_MOSTLY, 0)
        self.free(ptr)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """``nbytes`` from ``src`` to ``dst`` by the driver (``cuMemcpy``: host, device or
        managed memory on either side, without faulting managed pages over to the host)."""
        if nbytes:
            code = self.table.memcpy(dst, src, nbytes)
            if code != 0:
                raise CudaError(f"cuMemcpy({nbytes}) failed: {self.error_name(code)}")


_lock = threading.Lock()
_log = logging.getLogger("sparsecomp")
_driver: Driver | None = None


def use_driver(driver: Driver | None) -> Driver | None:
    """Install ``driver`` for every CUDA executable (None: find the real one on next use).

    Returns the one it replaces. Libraries bound to the old table are rebound
    on their next call.
    """
    global _driver
    with _lock:
        old, _driver = _driver, driver
    return old


def driver() -> Driver:
    """The process's CUDA driver, initialized on first use."""
    global _driver
    with _lock:
        if _driver is None:
            _driver = _real_driver()
        return _driver


def release_cached() -> None:
    """Give the GPU memory the pool keeps for reuse back to the driver (for other
    programs on the GPU); the next calls allocate afresh."""
    with _lock:
        pool = _driver.pool if _driver is not None else None
    if pool is not None:
        pool.release()


def _real_driver() -> Driver:
    try:
        from cuda.bindings import driver as cu  # type: ignore[import-untyped]
    except ImportError:
        raise CudaUnavailableError(
            "running a cuda:sm_XX executable needs the cuda-bindings package",
            hint="pip install 'sparsecomp[cuda]', or compile for target='cuda-emu:sm_80' "
            "to run the same kernels on this CPU",
        ) from None
    try:
        (err,) = cu.cuInit(0)
    except Exception as exc:  # cuda-bindings raises when it cannot find libcuda
        raise CudaUnavailableError(
            f"no CUDA driver on this machine: {exc}",
            hint="run on a machine with an NVIDIA GPU and its driver, or compile for "
            "target='cuda-emu:sm_80' to run the same kernels on this CPU",
        ) from None

    def check(result: Any, what: str) -> Any:
        code, *values = result if isinstance(result, tuple) else (result,)
        if int(code) != 0:
            raise CudaUnavailableError(f"{what} failed: {_name(cu, int(code))}")
        return values[0] if len(values) == 1 else values

    check((err,), "cuInit")
    device = check(cu.cuDeviceGet(0), "cuDeviceGet(0)")
    attrs = cu.CUdevice_attribute
    major = check(
        cu.cuDeviceGetAttribute(attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "sm"
    )
    minor = check(
        cu.cuDeviceGetAttribute(attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "sm"
    )
    name = check(cu.cuDeviceGetName(256, device), "cuDeviceGetName")
    context = check(cu.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    table = DriverTable()
    for slot, symbol in _ENTRY_POINTS:
        if slot in _ADVICE:  # optional: without them, buffers are plain managed memory
            code, *found = entry_point(cu, symbol)
            if int(code) != 0 or not int(found[0]):
                continue
            pfn = found[0]
        else:
            pfn, _status = check(entry_point(cu, symbol), symbol)
        setattr(table, slot, ctypes.cast(int(pfn), type(getattr(table, slot))))
    pool, hooks = device_pool.pooled(table)
    bound = Driver(
        table,
        sm=10 * int(major) + int(minor),
        name=bytes(name).split(b"\0")[0].decode(errors="replace"),
        error_name=lambda code: _name(cu, code),
        make_current=lambda: check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent"),
        keep=hooks,
        pool=pool,
    )
    modules: list[Any] = []

    def load_module(out: Any, image: int, size: int) -> int:
        data = ctypes.string_at(image, size) if size else ctypes.string_at(image) + b"\0"
        chosen = bound.cubins.get(data, data)
        buf = ctypes.create_string_buffer(chosen, len(chosen))
        code, module = cu.cuModuleLoadData(ctypes.addressof(buf))  # as cuda-python's samples
        if int(code) == 0:
            modules.append(module)
            out[0] = int(module)
        return int(code)

    table.load_module = LoadModule(load_module)
    bound.keep += [load_module, table.load_module, modules, context]
    return bound


def entry_point(cu: Any, symbol: str) -> Any:
    """``cuGetProcAddress`` of ``symbol`` through ``cu`` (``cuda.bindings.driver``), which
    takes the name as bytes: the result tuple, unchecked."""
    flags = cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT
    return cu.cuGetProcAddress(symbol.encode(), CUDA_VERSION, flags)


def _name(cu: Any, code: int) -> str:
    try:
        err, text = cu.cuGetErrorName(cu.CUresult(code))
        return text.decode() if int(err) == 0 else f"CUresult {code}"
    except Exception:  # an unknown code
        return f"CUresult {code}"


def to_device(value: Any, layout: Any = None) -> device_arrays.DeviceTensor:
    """A sparse tensor copied once into GPU memory, for calls without per-call copies.

    ``value``: a :class:`~sparsecomp.formats.tensor.SparseTensor` (packed in
    the layout the function takes) or a scipy.sparse matrix with ``layout``
    (a layout name such as ``"csr"``, or ``exe.<f>.signature.args[i].layout``).
    The memory is freed when the DeviceTensor is.
    """
    from sparsecomp.formats.tensor import SparseTensor

    host = value if isinstance(value, SparseTensor) else None
    if host is None:
        host = SparseTensor.from_scipy(value, layout if layout is not None else "csr")
    elif layout is not None:
        host = host.to(layout)
    dev = driver()
    with _lock:
        dev.make_current()
        pointers, owners = [], []
        for _, array in host.buffers():
            data = np.ascontiguousarray(array)
            ptr = dev.alloc(data.nbytes)
            free = functools.partial(_free_read_mostly, dev, nbytes=data.nbytes)
            owners.append(device_arrays.DeviceMemory(ptr, free))
            dev.copy(ptr, data.ctypes.data, data.nbytes)
            dev.read_mostly(ptr, data.nbytes)
            pointers.append(ptr)
    return device_arrays.DeviceTensor(host, pointers, owners, to_host)


def _free_read_mostly(dev: Driver, ptr: int, nbytes: int) -> None:
    dev.free_read_mostly(ptr, nbytes)


def to_host(tensor: device_arrays.DeviceTensor) -> Any:
    """A host :class:`~sparsecomp.formats.tensor.SparseTensor` copy of ``tensor``'s buffers
    (``cuMemcpy``)."""
    from sparsecomp.runtime.overflow import check_result
    from sparsecomp.runtime.results import trusted_tensor

    dev = driver()
    named = {}
    with _lock:
        dev.make_current()
        for name, dtype, length, address in tensor.buffers:
            array = np.empty(length, dtype)
            dev.copy(array.ctypes.data, address, array.nbytes)
            named[name] = array
    host = trusted_tensor(tensor.shape, tensor.layout, tensor.dtype, named)
    check_result(host, "a GPU result")  # narrow index buffers may have wrapped
    return host


def read_cubins(directory: Path, manifest: dict[str, Any], sm: int) -> dict[bytes, bytes]:
    """PTX -> cubin of a saved executable's kernels, for GPUs of compute capability ``sm``."""
    found = {}
    for kernel in manifest.get("kernels", []):
        cubin = kernel.get("cubin")
        if cubin and kernel.get("sm") == sm and (directory / cubin).exists():
            ptx = (directory / kernel["ptx"]).read_bytes() + b"\0"
            found[ptx] = (directory / cubin).read_bytes()
    return found


class CudaCaller(Caller):
    """Calls one function of a CUDA executable (see the module docstring)."""

    NATIVE = False  # arguments go to the GPU first

    def __init__(
        self, library: ctypes.CDLL, sig: Signature, directory: Path, manifest: Any
    ) -> None:
        super().__init__(library, sig)
        self.library = library
        self.directory = directory
        self.manifest = manifest
        self.bound_to: DriverTable | None = None
        self.result_dtypes = _item_dtypes(sig)
        self.gpu_fast = GpuFastArgs(sig)
        self._result_layout: list[tuple[int, int, np.dtype[Any]]] | None = None
        error = library["sparsecomp_cuda_error"]
        error.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        error.restype = ctypes.c_int
        self.error = error

    def _bind(self, dev: Driver) -> None:
        if self.bound_to is not dev.table:
            dev.cubins.update(read_cubins(self.directory, self.manifest, dev.sm))
            self.library["sparsecomp_cuda_bind"](ctypes.byref(dev.table))
            self.bound_to = dev.table

    def __call__(self, args: tuple[Any, ...]) -> Any:
        if self.divert is not None and (other := self.divert(args)) is not None:
            return other(*args)
        return self.call_diverted(args)

    def call_diverted(self, args: tuple[Any, ...]) -> Any:
        """The call, ``args`` known not to need a variant or a prepared operand's path
        (``Executable`` asked ``divert`` already)."""
        dev = driver()
        with _lock:  # one call at a time: the shim keeps one error slot
            self._bind(dev)
            dev.make_current()
            return self._run(dev, args)

    def _run(self, dev: Driver, args: tuple[Any, ...]) -> Any:
        out = self.result_struct() if self.result_struct is not None else None
        buf = self.words_type() if self.words_type is not None else None
        call = Out(ctypes.addressof(buf) if buf is not None else 0, [])
        if out is not None:
            call.params.append(ctypes.addressof(out))
        theirs: set[int] = set()  # the caller's GPU buffers
        first_gpu = self.gpu_fast.emit(args, call, theirs)
        if first_gpu is not None:  # every argument on the GPU already: no copy
            return self._complete(dev, call, buf, out, [], theirs, first_gpu, args)
        on_gpu: dict[int, int] = {}  # id of a placeholder item -> its GPU pointer
        first: list[Any] = []  # the first argument in GPU memory

        def elsewhere(spec: ArgSpec, value: Any, where: str) -> Any:
            if isinstance(value, device_arrays.DeviceTensor):
                holders, pointers = value.items(spec, where)
                on_gpu.update((id(h), p) for h, p in zip(holders, pointers, strict=True))
                return value.shape, [*holders, *value.shape]
            if (iface := device_arrays.interface(value)) is None:
                return None
            holder = device_arrays.placeholder(spec, iface, where)
            on_gpu[id(holder)] = device_arrays.pointer(iface)
            first.append(value)
            return holder.shape, [holder]

        items = flatten(self.sig, args, elsewhere, self.conversions.convert)
        call = Out(ctypes.addressof(buf) if buf is not None else 0, [])
        if out is not None:
            call.params.append(ctypes.addressof(out))
        owned: list[int] = []
        try:
            for item, rank in zip(items, self.ranks, strict=True):
                if rank is None:
                    call.params.append(item)
                elif id(item) in on_gpu:  # no copy
                    call.array(item, on_gpu[id(item)])
                else:
                    host = np.ascontiguousarray(item)
                    ptr = dev.alloc(host.nbytes)
                    owned.append(ptr)
                    dev.copy(ptr, host.ctypes.data, host.nbytes)
                    call.array(host, ptr)
        except BaseException:
            for ptr in owned:
                dev.free(ptr)
            raise
        first_gpu = first[0] if first else None
        return self._complete(dev, call, buf, out, owned, set(on_gpu.values()), first_gpu, args)

    def _complete(self, dev: Driver, call: Out, buf: Any, out: Any, owned: list[int],
                theirs: set[int], first_gpu: Any, args: tuple[Any, ...]) -> Any:  # fmt: skip
        """Run the host code on ``call``'s parameters; the results, on the GPU where a GPU
        array came in (``first_gpu``), else on the host; ``owned`` (copies of host
        arguments) and the results' buffers nobody keeps are freed."""
        try:
            if buf is not None:
                buf[:] = call.words
            returned = self.cfunc(*call.params)
            values = self.unpack(out) if self.unpack is not None and out is not None else ()
            results = self._result_buffers(values)
            # freed also when the call failed; not a buffer of the caller's (a result
            # may be an argument: sparse-iter-forward-returned-arguments)
            owned += [p for p in results if p not in theirs]
            self._raise_failure(dev)
            if out is None:
                return scalar(self.sig.results[0], returned) if self.sig.results else None
            if first_gpu is not None and all(s.declared_layout is None for s in self.sig.results):
                kept = set(results) - theirs  # not the caller's arrays
                owned = [p for p in owned if p not in kept]  # the results own them now
                return self._on_gpu(dev, values, kept, first_gpu, args)
            values = self._to_host(dev, values)
            if self.one_array is not None:
                rank, dtype = self.one_array
                return result_array(values, rank, dtype, {}, {})
            return unflatten(self.sig, values, {})
        finally:
            for ptr in dict.fromkeys(owned):
                dev.free(ptr)

    def _on_gpu(
        self, dev: Driver, values: tuple[Any, ...], kept: set[int], first: Any, args: Any
    ) -> Any:
        """Results left on the GPU: dense ones as the kind of array ``first`` is, sparse
        ones as :class:`~sparsecomp.runtime.device_arrays.DeviceTensor`."""
        owners: dict[int, Any] = {p: device_arrays.DeviceMemory(p, dev.free) for p in kept}
        found: list[Any] = []
        at = 0
        for spec in self.sig.results:
            if spec.kind == "scalar":
                found.append(scalar(spec, values[at]))
                at += 1
                continue
            if spec.kind == "sparse":
                buffers, keep = [], []
                for name, dtype in spec.buffers:
                    words = values[at : at + 5]  # a rank-1 descriptor
                    address = int(words[1]) + int(words[2]) * np.dtype(dtype).itemsize
                    buffers.append((name, np.dtype(dtype), int(words[3]), address))
                    keep.append(owners.get(int(words[0]), args))  # else an argument's
                    at += 5
                shape = tuple(int(w) for w in values[at : at + spec.rank])
                at += spec.rank
                found.append(device_arrays.DeviceTensor.from_buffers(
                    shape, spec.dtype, spec.layout, buffers, keep, to_host))  # fmt: skip
                continue
            rank, item = spec.rank, spec.dtype.itemsize
            words = values[at : at + descriptor_words(rank)]
            at += descriptor_words(rank)
            shape = tuple(int(w) for w in words[3 : 3 + rank])
            strides = tuple(int(w) * item for w in words[3 + rank :])
            address = int(words[1]) + int(words[2]) * item
            owner = owners.get(int(words[0]), args)  # else an argument's memory: keep args
            array = device_arrays.DeviceArray(address, shape, strides, spec.dtype, owner)
            found.append(device_arrays.like(array, first))
        return found[0] if len(found) == 1 else tuple(found)

    def _raise_failure(self, dev: Driver) -> None:
        where = ctypes.c_char_p()
        code = self.error(ctypes.byref(where))
        if code != 0:
            call = (where.value or b"?").decode()
            raise CudaError(f"{self.sig.name}: {call} failed: {dev.error_name(code)}")

    def _descriptors(self, values: tuple[Any, ...]) -> list[tuple[int, int, np.dtype[Any]]]:
        """(first word, rank, dtype) of every result descriptor in ``values`` (the same
        for every call: computed once)."""
        found = self._result_layout
        if found is None:
            found = []
            at = 0
            ranks = item_ranks(self.sig.results)
            for dtype, rank in zip(self.result_dtypes, ranks, strict=True):
                if rank is not None:
                    found.append((at, rank, dtype))
                at += 1 if rank is None else descriptor_words(rank)
            self._result_layout = found
        return found

    def _result_buffers(self, values: tuple[Any, ...]) -> list[int]:
        """The device buffers the host code allocated for the results."""
        return [int(values[at]) for at, _, _ in self._descriptors(values) if values[at]]

    def _to_host(self, dev: Driver, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """``values`` with every result buffer copied into malloc-ed host memory."""
        out = list(values)
        for at, rank, dtype in self._descriptors(values):
            words = values[at : at + descriptor_words(rank)]
            if words[0]:
                out[at : at + 3] = _copy_out(dev, words, rank, dtype)
        return tuple(out)


def _copy_out(
    dev: Driver, words: tuple[int, ...], rank: int, dtype: np.dtype[Any]
) -> tuple[int, int, int]:
    """(allocated, aligned, offset) of a host copy of the memory a descriptor covers."""
    sizes, strides = words[3 : 3 + rank], words[3 + rank : 3 + 2 * rank]
    span = 0 if 0 in sizes else 1 + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
    nbytes = (words[2] + span) * dtype.itemsize
    host = _malloc(max(nbytes, 1))
    if not host:
        raise MemoryError(f"cannot allocate {nbytes} bytes for a result")
    dev.copy(host, int(words[1]), nbytes)
    return (host, host, words[2])


_libc = ctypes.CDLL(None)
_malloc = _libc.malloc
_malloc.argtypes = [ctypes.c_size_t]
_malloc.restype = ctypes.c_void_p


def _item_dtypes(sig: Signature) -> list[np.dtype[Any]]:
    """The element type of each flattened result (each buffer of a sparse one)."""
    specs = sig.results
    out: list[np.dtype[Any]] = []
    for spec in specs:
        if spec.kind == "sparse":
            out += [np.dtype(dtype) for _, dtype in spec.buffers]
            out += [np.dtype(np.int64)] * spec.rank
        else:
            out.append(spec.dtype)
    assert len(out) == len(_item_specs(specs))
    return out
