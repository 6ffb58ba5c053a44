"""``SparseLinear`` on CUDA tensors: the kernels compiled for the GPU, the weight on it.

A layer moved to a GPU (``model.to("cuda")``) runs its forward pass with the
same MLIR programs as on the CPU (:mod:`.kernels`), compiled for
``cuda:sm_XX``, the compute capability of the tensor's device
(:func:`target`). Nothing goes through the host:

* the weight's index buffers (its placement in the layout, :mod:`.structure`)
  are copied to the device once per placement and device, and kept;
* its values, in CSR order in the ``values`` parameter, are gathered into
  the layout's storage order on the device at every call (``index_select``:
  the parameter may have changed in any way), into a buffer of the
  placement's (a layout stored in CSR order reads the parameter itself);
* the operand goes to the executable as a
  :class:`~sparsecomp.runtime.device_arrays.DeviceTensor` over those
  buffers, the input and the bias as they are (``__cuda_array_interface__``),
  and the result comes back as a CUDA tensor on the same device
  (:mod:`sparsecomp.runtime.cuda`).

The kernels run on the driver's default stream and the call synchronizes
it; a model that runs torch on other streams must synchronize them first.
Inference only: a forward pass that autograd records is refused (the
backward kernels, SDDMM at the pattern and the transposed product, are not
wired to the GPU yet). Without a GPU the same programs' GPU schedule runs
under ``cuda-emu`` (the tests check its numerics for every layout).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import torch
from torch import Tensor

from sparsecomp import forksafe
from sparsecomp.errors import SparsecompError
from sparsecomp.torch import kernels, structure


def target(device: torch.device) -> str:
    """The compile target of a CUDA device: ``cuda:sm_<major><minor>``."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"cuda:sm_{major}{minor}"


def check_tensor(t: Tensor, what: str, device: torch.device, dtype: torch.dtype) -> Tensor:
    """``t`` contiguous, after checking that it is a dense tensor of ``dtype`` on ``device``."""
    if t.device != device:
        raise SparsecompError(
            f"{what} is on {t.device}, but the sparse weight is on {device}",
            hint="move the module and its inputs to one device",
        )
    if t.layout != torch.strided:
        raise SparsecompError(f"{what} must be a dense (strided) tensor, not {t.layout}")
    if t.dtype != dtype:
        raise SparsecompError(
            f"{what} is {t.dtype}, but the sparse weight is {dtype}",
            hint="convert one of them with .to(dtype)",
        )
    return t.detach().contiguous()


class _DeviceStage:
    """One placement's operand on one device (see the module)."""

    def __init__(self, perm: Tensor, index: list[Tensor], layout: str, shape: list[int],
                 device: torch.device) -> None:  # fmt: skip
        self.packed = structure.tensor_of(layout, tuple(shape), tuple(index))
        self.device = device
        order = perm.detach().to(torch.int64)
        self.fill = bool(order.numel()) and bool((order < 0).any())
        if self.fill:  # -1 reads a zero appended after the values (each read once)
            order = torch.where(order < 0, int((order >= 0).sum()), order)
        self.order = order.to(device) if order.numel() else None
        self.index = [  # the index buffers, on the device (None for values buffers)
            None if name.endswith("values") else torch.from_numpy(np.array(array)).to(device)
            for name, array in self.packed.buffers()
        ]
        self.buffer: Tensor | None = None  # storage-order values (with a gather)
        self.host: Any = None  # the structure with values of the dtype (shape and ABI only)
        self.lock = forksafe.lock()

    def operand(self, values: Tensor) -> Any:
        """The weight as a ``DeviceTensor`` over ``values`` (CSR order) in storage order.
        Call with :attr:`lock` held: the buffer is refilled by the next call."""
        from sparsecomp.runtime.cuda import to_host
        from sparsecomp.runtime.device_arrays import DeviceTensor

        vals = values.detach().contiguous()
        if self.order is not None:
            if self.buffer is None or self.buffer.dtype != vals.dtype:
                self.buffer = torch.empty(self.order.shape[0], dtype=vals.dtype, device=self.device)
            source = torch.cat([vals, vals.new_zeros(1)]) if self.fill else vals
            torch.index_select(source, 0, self.order, out=self.buffer)
            vals = self.buffer
        item = vals.element_size()
        pointers, at = [], 0
        for (_, array), on_device in zip(self.packed.buffers(), self.index, strict=True):
            if on_device is None:  # values (a composable tensor's parts: one slice each)
                pointers.append(vals.data_ptr() + at * item)
                at += int(array.size)
            else:
                pointers.append(on_device.data_ptr())
        dtype = _numpy(vals.dtype)
        if self.host is None or self.host.dtype != dtype:
            self.host = self.packed.with_values(np.zeros(self.packed.nse, dtype))
        return DeviceTensor(self.host, pointers, (vals, self.index), to_host)


def _numpy(dtype: torch.dtype) -> np.dtype[Any]:
    return kernels.numpy_dtype(dtype)


#: ``(id(perm), device) -> its stage``, dropped with ``perm``
_stages: dict[tuple[int, str], _DeviceStage] = {}
_stages_lock = forksafe.lock()


def _stage(perm: Tensor, index: list[Tensor], layout: str, shape: list[int],
           device: torch.device) -> _DeviceStage:  # fmt: skip
    key = (id(perm), str(device))
    found = _stages.get(key)
    if found is not None:
        return found
    stage = _DeviceStage(perm, index, layout, shape, device)
    with _stages_lock:
        if key not in _stages:
            weakref.finalize(perm, _stages.pop, key, None)
            _stages[key] = stage
        return _stages[key]


def run_linear(
    values: Tensor,
    x: Tensor,
    perm: Tensor,
    index: list[Tensor],
    layout: str,
    shape: list[int],
    bias: Tensor | None = None,
    activation: str = "",
) -> Tensor:
    """:func:`sparsecomp.torch.ops.run_linear` for CUDA tensors (see the module)."""
    device = values.device
    dense = check_tensor(x, "the input", device, values.dtype)
    added = None if bias is None else check_tensor(bias, "the bias", device, values.dtype)
    name = kernels.linear_name(added is not None, activation)
    return _call(name, values, dense, added, perm, index, layout, shape)


def run_layout_mm(
    values: Tensor,
    b: Tensor,
    perm: Tensor,
    index: list[Tensor],
    layout: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    """:func:`sparsecomp.torch.ops.run_layout_mm` for CUDA tensors (see the module)."""
    device = values.device
    dense = check_tensor(b, "the dense operand", device, values.dtype)
    added = None if bias is None else check_tensor(bias, "the bias", device, values.dtype)
    name = "spmm" if added is None else "spmm_bias"
    return _call(name, values, dense, added, perm, index, layout, shape)


def _call(
    name: str,
    values: Tensor,
    dense: Tensor,
    added: Tensor | None,
    perm: Tensor,
    index: list[Tensor],
    layout: str,
    shape: list[int],
) -> Tensor:
    """Kernel ``name`` on the placement's device operand, the dense operand and the bias."""
    device = values.device
    fn = kernels.kernel(name, values.dtype, layout, target(device))
    stage = _stage(perm, index, layout, shape, device)
    with stage.lock:  # the operand's buffer is the placement's until the call returns
        operand = stage.operand(values)
        return fn(operand, dense) if added is None else fn(operand, dense, added)
