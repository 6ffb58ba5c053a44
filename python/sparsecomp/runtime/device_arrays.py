"""GPU arrays in and out of CUDA executables, without copies.

Dense arguments may be any object with ``__cuda_array_interface__`` (CuPy,
PyTorch CUDA tensors, Numba): their device pointer goes to the kernels as it
is. Dense results of a call that got one come back on the GPU: as a CuPy
array or a torch tensor when the first device argument was one (both wrap
the memory without copying), else as a :class:`DeviceArray`, which exposes
``__cuda_array_interface__`` itself. Each result owns its memory (freed when
the last array over it dies).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.runtime.abi import ArgSpec


def interface(value: Any) -> dict[str, Any] | None:
    """The ``__cuda_array_interface__`` of ``value``, or None for host objects."""
    found = getattr(value, "__cuda_array_interface__", None)
    return found if isinstance(found, dict) else None


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

    def __init__(self, host: Any, pointers: list[int], owner: Any) -> None:  # host: a SparseTensor
        self.shape = tuple(int(n) for n in host.shape)
        self.dtype = host.dtype
        self.layout = host.layout
        self.buffers = [
            (name, array.dtype, int(array.size), ptr)
            for (name, array), ptr in zip(host.buffers(), pointers, strict=True)
        ]
        self.owner = owner

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
        import ctypes

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
        import torch  # type: ignore[import-not-found]

        return torch.as_tensor(array, device="cuda")
    return array
