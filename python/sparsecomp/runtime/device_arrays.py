"""GPU arrays in and out of CUDA executables, without copies.

Dense arguments may be any object with ``__cuda_array_interface__`` (CuPy,
PyTorch CUDA tensors, Numba) or with DLPack's ``__dlpack__`` on a CUDA
device (JAX, and the others too): their device pointer goes to the kernels
as it is. Dense results of a call that got one come back on the GPU: as a CuPy
array or a torch tensor when the first device argument was one (both wrap
the memory without copying), else as a :class:`DeviceArray`, which exposes
``__cuda_array_interface__`` itself. Each result owns its memory (freed when
the last array over it dies).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.runtime.abi import ArgSpec

#: DLPack device types of GPU memory the kernels can read: CUDA, CUDA managed.
_DLPACK_CUDA = (2, 13)
#: DLPack type codes: int, uint, float, bool.
_DLPACK_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """The head of DLPack's ``DLManagedTensor`` (``dlpack.h``, unversioned capsules)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def interface(value: Any) -> dict[str, Any] | None:
    """The ``__cuda_array_interface__`` of ``value`` (made from its DLPack capsule where it
    has only that, on a CUDA device), or None for host objects."""
    found = getattr(value, "__cuda_array_interface__", None)
    if isinstance(found, dict):
        return found
    device = getattr(value, "__dlpack_device__", None)
    if device is None or not hasattr(value, "__dlpack__"):
        return None
    if int(device()[0]) not in _DLPACK_CUDA:
        return None
    return _from_dlpack(value.__dlpack__())


def _from_dlpack(capsule: Any) -> dict[str, Any]:
    """An array interface dict over a ``dltensor`` capsule (kept in it: the capsule's
    destructor gives the tensor back to its producer)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = _DLTensor.from_address(get(capsule, b"dltensor"))
    kind = _DLPACK_KINDS.get(tensor.dtype.code)
    if kind is None or tensor.dtype.lanes != 1 or tensor.dtype.bits % 8:
        raise SparsecompError(
            f"a DLPack array of type code {tensor.dtype.code}, {tensor.dtype.bits} bits "
            f"x {tensor.dtype.lanes} lanes has no numpy dtype the kernels take"
        )
    itemsize = tensor.dtype.bits // 8
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    strides = None
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) * itemsize for i in range(tensor.ndim))
    return {
        "version": 3,
        "shape": shape,
        "typestr": np.dtype(f"{kind}{itemsize}").str,
        "strides": strides,
        "data": ((tensor.data or 0) + tensor.byte_offset, False),
        "capsule": capsule,
    }


def placeholder(spec: ArgSpec, iface: dict[str, Any], where: str) -> np.ndarray:
    """An unfilled host array of the device array's shape and dtype, for the argument checks.

    ``np.empty`` touches no memory, so this costs nothing for large arrays.
    Device arrays must be dense operands of the ABI's dtype and rank, C-contiguous.
    """
    if spec.kind != "dense":
        raise SparsecompError(
            f"{where}: GPU arrays are taken for dense operands; pass a {spec.kind} "
            "operand as a scipy.sparse matrix, SparseTensor, DeviceTensor or number"
        )
    shape = tuple(int(n) for n in iface["shape"])
    dtype = np.dtype(iface["typestr"])
    if dtype != spec.dtype or len(shape) != spec.rank:
        raise SparsecompError(
            f"{where}: expected a {spec.dtype} array of rank {spec.rank}, "
            f"got a GPU array of {dtype} and shape {shape}"
        )
    strides = iface.get("strides")
    if strides is not None and tuple(strides) != np.empty(shape, dtype).strides:
        raise SparsecompError(f"{where}: GPU arrays must be C-contiguous (strides {strides})")
    return np.empty(shape, dtype)


class DeviceTensor:
    """A sparse tensor whose buffers live in GPU memory (``sparsecomp.runtime.cuda.to_device``).

    Passed to a CUDA executable's function in the layout it takes, it goes to
    the kernels without a copy or a check: the buffers were checked when the
    host tensor was packed. ``shape``, ``dtype``, ``layout`` as the host
    tensor's; ``buffers``: ``(name, dtype, length, pointer)`` in ABI order.
    """

    def __init__(
        self, host: Any, pointers: list[int], owner: Any, fetch: Callable[[DeviceTensor], Any]
    ) -> None:  # host: a SparseTensor
        #: copies it back to the host (the driver's, ``sparsecomp.runtime.cuda.to_host``)
        self.fetch = fetch
        self.shape = tuple(int(n) for n in host.shape)
        self.dtype = host.dtype
        self.layout = host.layout
        self.buffers = [
            (name, array.dtype, int(array.size), ptr)
            for (name, array), ptr in zip(host.buffers(), pointers, strict=True)
        ]
        self.owner = owner

    @classmethod
    def from_buffers(
        cls,
        shape: tuple[int, ...],
        dtype: Any,
        layout: Any,
        buffers: list[tuple[str, np.dtype[Any], int, int]],
        owner: Any,
        fetch: Callable[[DeviceTensor], Any],
    ) -> DeviceTensor:
        """A tensor over GPU buffers a kernel produced (a call's sparse result), in the
        layout's buffer order; ``owner`` keeps their memory alive."""
        tensor = cls.__new__(cls)
        tensor.fetch = fetch
        tensor.shape = tuple(int(n) for n in shape)
        tensor.dtype = np.dtype(dtype)
        tensor.layout = layout
        tensor.buffers = list(buffers)
        tensor.owner = owner
        return tensor

    def to_host(self) -> Any:
        """A host :class:`~sparsecomp.formats.tensor.SparseTensor` copy."""
        return self.fetch(self)

    def to_scipy(self) -> Any:
        """A scipy.sparse copy on the host (:meth:`to_host`, then its ``to_scipy``)."""
        return self.to_host().to_scipy()

    def items(self, spec: ArgSpec, where: str) -> tuple[list[np.ndarray], list[int]]:
        """Placeholders of its buffers (their lengths and dtypes) and their pointers."""
        if self.layout != spec.layout or self.dtype != spec.dtype:
            raise SparsecompError(
                f"{where}: a DeviceTensor of {self.dtype} in layout {self.layout}; "
                f"this function takes {spec.dtype} in {spec.layout}",
                hint="make it with to_device(A, layout=<the argument's layout>)",
            )
        holders = [np.empty(length, dtype) for _, dtype, length, _ in self.buffers]
        return holders, [ptr for *_, ptr in self.buffers]

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={self.shape}, dtype={self.dtype}, layout={self.layout})"


def pointer(iface: dict[str, Any]) -> int:
    return int(iface["data"][0] or 0)


class DeviceMemory:
    """Device memory that one or more result arrays share; freed by ``free`` when unused."""

    def __init__(self, address: int, free: Any) -> None:
        self.address = address
        self._free = free

    def __del__(self) -> None:
        try:
            self._free(self.address)
        except Exception:  # at interpreter exit the driver may be gone with its context
            pass


class DeviceArray:
    """A dense result in GPU memory: ``__cuda_array_interface__`` (version 3) and ``get()``."""

    def __init__(
        self, address: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: Any, owner: Any
    ) -> None:
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.owner = owner  # keeps the memory alive
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": shape,
            "typestr": self.dtype.str,
            "strides": strides,
            "data": (address, False),
            "stream": None,  # the kernels have finished: no stream to wait on
        }

    def get(self) -> np.ndarray:
        """A host copy (managed memory is also host-readable)."""
        iface = self.__cuda_array_interface__
        if 0 in self.shape:
            return np.empty(self.shape, self.dtype)
        strides = iface["strides"]
        nbytes = self.dtype.itemsize + sum(
            (n - 1) * s for n, s in zip(self.shape, strides, strict=True)
        )
        raw = np.frombuffer(ctypes.string_at(iface["data"][0], nbytes), np.uint8)
        return np.lib.stride_tricks.as_strided(raw.view(self.dtype), self.shape, strides).copy()

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype})"


def like(array: DeviceArray, first: Any) -> Any:
    """``array`` as the kind of ``first`` (the call's first GPU argument) where possible."""
    module = type(first).__module__.split(".")[0]
    if module == "cupy":
        import cupy  # type: ignore[import-not-found]

        return cupy.asarray(array)
    if module == "torch":
        import torch  # type: ignore[import-not-found, unused-ignore]

        return torch.as_tensor(array, device="cuda")
    return array
