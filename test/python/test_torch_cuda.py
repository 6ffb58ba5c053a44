"""SparseLinear on CUDA (sparsecomp.torch.device): the GPU kernels' numerics under
cuda-emu for every layout and op a layer runs there, PTX for a real GPU, the
weight's device operand, and (where torch has a GPU) the layer end to end."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch

import sparsecomp.torch as st
from sparsecomp.compiler.cuda import ptxas
from sparsecomp.errors import SparsecompError
from sparsecomp.torch import device, kernels, ops, staged

EMU = "cuda-emu:sm_90"
#: layouts whose layers run the row-major kernels, and two that take the SpMM ones
ROW_MAJOR = ["csr", "bsr:8x1", "bsr:4x4", "nm:2:4", "ell"]
OTHERS = ["hyb", "bsr:1x4"]


def _layer(layout: str, bias: bool = True, dtype: torch.dtype = torch.float32) -> st.SparseLinear:
    g = torch.Generator().manual_seed(3)
    w = torch.randn(24, 32, generator=g, dtype=dtype)
    rule = "nm:2:4" if layout.startswith("nm") else "random_fraction:0.7"
    keep = st.mask_of(w, rule)
    b = torch.randn(24, generator=g, dtype=dtype) if bias else None
    return st.SparseLinear.from_dense(w, b, layout, keep)


def _placement(layer: st.SparseLinear) -> tuple:
    assert layer._placed is not None
    _, perm, index, _, _, lay, _ = layer._placed
    return perm, index, lay


def _dense(layer: st.SparseLinear, x: torch.Tensor, activation: str = "") -> torch.Tensor:
    ref = layer.to_dense_linear()(x)
    return {"": ref, "gelu": torch.nn.functional.gelu(ref), "relu": torch.relu(ref)}[activation]


@pytest.mark.parametrize("layout", ROW_MAJOR)
@pytest.mark.parametrize(("bias", "activation"), [(False, ""), (True, ""), (True, "gelu")])
def test_gpu_linear_kernels_equal_dense_under_emulation(
    layout: str, bias: bool, activation: str
) -> None:
    """What a layer on a GPU runs: the GPU schedule of the linear kernels."""
    layer = _layer(layout, bias)
    assert kernels.row_major(_placement(layer)[2])
    perm, index, lay = _placement(layer)
    x = torch.randn(19, 32)  # rows not a multiple of any tile
    name = ("linear_bias" if bias else "linear") + (f"_{activation}" if activation else "")
    fn = kernels.kernel(name, torch.float32, lay, EMU)
    with staged.operand(layer.values.detach().numpy(), perm, index, lay, [24, 32]) as a:
        args = (a, x.numpy()) if not bias else (a, x.numpy(), layer.bias.detach().numpy())
        got = torch.from_numpy(np.asarray(fn(*args)))
    torch.testing.assert_close(got, _dense(layer, x, activation).detach(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", OTHERS)
def test_gpu_spmm_kernels_equal_dense_under_emulation(layout: str) -> None:
    layer = _layer(layout)
    perm, index, lay = _placement(layer)
    assert not kernels.row_major(lay)
    x = torch.randn(7, 32)
    fn = kernels.kernel("spmm_bias", torch.float32, lay, EMU)
    with staged.operand(layer.values.detach().numpy(), perm, index, lay, [24, 32]) as a:
        yt = np.asarray(fn(a, x.t().contiguous().numpy(), layer.bias.detach().numpy()))
    torch.testing.assert_close(torch.from_numpy(yt).t(), _dense(layer, x).detach(),
                               rtol=1e-4, atol=1e-4)  # fmt: skip


def test_gpu_kernels_follow_torchs_tf32_setting() -> None:
    """torch runs f32 matmuls exactly unless told to use tf32; a sparse layer's GPU kernel
    does the same: its blocks take the tf32 tensor cores only where
    ``torch.backends.cuda.matmul.allow_tf32`` is set (and then within tf32's error)."""
    layer = _layer("bsr:1x4")
    perm, index, lay = _placement(layer)
    x = torch.randn(7, 32)
    want = _dense(layer, x).detach()
    before = torch.backends.cuda.matmul.allow_tf32
    got = {}
    try:
        for allow in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = allow
            fn = kernels.kernel("spmm_bias", torch.float32, lay, EMU)
            with staged.operand(layer.values.detach().numpy(), perm, index, lay, [24, 32]) as a:
                yt = np.asarray(fn(a, x.t().contiguous().numpy(), layer.bias.detach().numpy()))
            got[allow] = torch.from_numpy(yt).t()
            exe = kernels.program("spmm_bias", torch.float32, target=EMU)
            assert exe.compile_options.get("gpu_tf32") is allow
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    torch.testing.assert_close(got[False], want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[True], want, rtol=1e-2, atol=1e-2)
    assert not torch.allclose(got[True], want, rtol=1e-5, atol=1e-5)  # tf32 did run


@pytest.mark.skipif(ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("layout", ["csr", "bsr:8x1"])
def test_gpu_linear_kernels_build_for_a_real_gpu(layout: str) -> None:
    """PTX for sm_90, validated by ptxas (the build runs it where installed)."""
    layer = _layer(layout)
    fn = kernels.kernel("linear_bias_gelu", torch.float32, _placement(layer)[2], "cuda:sm_90")
    assert fn.signature.name == "linear_bias_gelu"


def _read(pointer: int, dtype: np.dtype, length: int) -> np.ndarray:
    raw = (ctypes.c_char * (length * dtype.itemsize)).from_address(pointer)
    return np.frombuffer(bytes(raw), dtype)


@pytest.mark.parametrize("layout", ["csr", "bsr:8x1", "bsr:4x4", "hyb", "ell"])
def test_the_device_operand_holds_the_staged_operands_buffers(layout: str) -> None:
    """The device stage's gather and buffers (run here on the CPU: the same torch ops
    and pointers a GPU's stage makes) are what the CPU kernels read."""
    layer = _layer(layout)
    perm, index, lay = _placement(layer)
    stage = device._DeviceStage(perm, index, lay, [24, 32], torch.device("cpu"))
    operand = stage.operand(layer.values)
    with staged.operand(layer.values.detach().numpy(), perm, index, lay, [24, 32]) as host:
        expected = host.buffers()
        assert [b[0] for b in operand.buffers] == [name for name, _ in expected]
        for (name, dtype, length, pointer), (_, array) in zip(
            operand.buffers, expected, strict=True
        ):
            assert length == array.size, name
            assert dtype == array.dtype, name
            np.testing.assert_array_equal(_read(pointer, dtype, length), array, err_msg=name)
    assert operand.layout == host.layout
    assert operand.shape == (24, 32)


def test_values_changed_in_place_reach_the_next_device_operand() -> None:
    layer = _layer("bsr:8x1")
    perm, index, lay = _placement(layer)
    stage = device._DeviceStage(perm, index, lay, [24, 32], torch.device("cpu"))
    stage.operand(layer.values)
    with torch.no_grad():
        layer.values.mul_(2.0)
    operand = stage.operand(layer.values)
    with staged.operand(layer.values.detach().numpy(), perm, index, lay, [24, 32]) as host:
        _, dtype, length, pointer = operand.buffers[-1]
        np.testing.assert_array_equal(_read(pointer, dtype, length), host.buffers()[-1][1])


def test_cuda_tensors_on_a_cpu_layer_are_refused_clearly() -> None:
    layer = _layer("csr")
    perm, index, lay = _placement(layer)
    fake = torch.empty(0)
    with pytest.raises(SparsecompError, match="on the CPU"):
        ops.run_linear(layer.values, fake.reshape(0, 32).to("meta"), perm, index, lay, [24, 32])


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA device here")


@cuda
@pytest.mark.parametrize("layout", ["csr", "bsr:8x1", "nm:2:4", "hyb"])
def test_a_layer_on_the_gpu_equals_dense_and_stays_there(layout: str) -> None:
    layer = _layer(layout).cuda()
    layer.activation = "gelu"
    x = torch.randn(5, 9, 32, device="cuda")
    with torch.no_grad():
        got = layer(x)
        ref = torch.nn.functional.gelu(layer.to_dense_linear()(x))
    assert got.device.type == "cuda"
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@cuda
def test_training_on_the_gpu_is_refused_with_a_hint() -> None:
    layer = _layer("csr").cuda()
    with pytest.raises(SparsecompError, match="inference only"):
        layer(torch.randn(3, 32, device="cuda"))
