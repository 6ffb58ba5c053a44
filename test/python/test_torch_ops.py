"""sparsecomp.torch's custom ops: opcheck, torch.compile(fullgraph=True), torch tensors in calls."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import sparsecomp.torch as st
from sparsecomp.errors import SparsecompError
from sparsecomp.torch import kernels
from sparsecomp.torch.tensors import call, from_torch, to_torch

# torch's own notice on every CSR/CSC/BSR tensor the tests build
pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def _layer(layout: str = "csr", dtype=torch.float64) -> st.SparseLinear:
    g = torch.Generator().manual_seed(7)
    w = torch.randn(10, 12, generator=g, dtype=dtype)
    keep = torch.rand(10, 12, generator=g) < 0.4
    return st.SparseLinear.from_dense(w, torch.randn(10, dtype=dtype), layout, keep)


@pytest.mark.parametrize("layout", ["csr", "bsr:2x2", "hyb"])
@pytest.mark.parametrize("bias", [False, True])
def test_opcheck_sparse_mm(layout: str, bias: bool) -> None:
    layer = _layer(layout)
    pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t = layer._placed
    b = torch.randn(12, 5, dtype=torch.float64, requires_grad=True)
    values = layer.values.detach().clone().requires_grad_()
    args = (values, b, pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t, [10, 12])
    if bias:  # the bias rides in the op (added to the fresh result), with its gradient
        args = (*args, torch.randn(10, dtype=torch.float64, requires_grad=True))
        got = torch.ops.sparsecomp.sparse_mm(*args)
        want = layer.weight.detach() @ b.detach() + args[-1].detach()[:, None]
        torch.testing.assert_close(got.detach(), want)
        got.sum().backward()
        torch.testing.assert_close(args[-1].grad, torch.full((10,), 5.0, dtype=torch.float64))
    torch.library.opcheck(torch.ops.sparsecomp.sparse_mm.default, args)


@pytest.mark.parametrize("layout", ["bsr:2x2", "bsr:2x1", "bsr:4x1"])
@pytest.mark.parametrize("bias", [False, True])
def test_opcheck_sparse_linear(layout: str, bias: bool) -> None:
    """The row-major op (``x`` tokens x features in, ``x W^T (+ b)`` out) of layouts
    whose blocks span rows: its result, its gradients and opcheck."""
    layer = _layer(layout)
    assert kernels.row_major(layer._placed[5])
    pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t = layer._placed
    x = torch.randn(7, 12, dtype=torch.float64, requires_grad=True)
    values = layer.values.detach().clone().requires_grad_()
    args = (values, x, pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t, [10, 12])
    want = x.detach() @ layer.weight.detach().T
    if bias:
        args = (*args, torch.randn(10, dtype=torch.float64, requires_grad=True))
        want = want + args[-1].detach()
    got = torch.ops.sparsecomp.sparse_linear(*args)
    assert got.shape == (7, 10)
    assert got.is_contiguous()
    torch.testing.assert_close(got.detach(), want)
    dy = torch.randn(7, 10, dtype=torch.float64)
    got.backward(dy)
    torch.testing.assert_close(x.grad, dy @ layer.weight.detach())
    if bias:
        torch.testing.assert_close(args[-1].grad, dy.sum(0))
    torch.library.opcheck(torch.ops.sparsecomp.sparse_linear.default, args)
    torch.library.opcheck(
        torch.ops.sparsecomp.linear.default,
        (values.detach(), x.detach(), fwd_perm, fwd_index, lay, [10, 12]),
    )


def test_linear_refuses_an_input_of_the_wrong_width() -> None:
    layer = _layer("bsr:2x2")
    _, fwd_perm, fwd_index, _, _, lay, _ = layer._placed
    x = torch.randn(3, 11, dtype=torch.float64)
    with pytest.raises(SparsecompError, match=r"the input must be a matrix with 12 columns"):
        torch.ops.sparsecomp.linear(layer.values.detach(), x, fwd_perm, fwd_index, lay, [10, 12])


def test_opcheck_layout_mm_and_sddmm() -> None:
    layer = _layer("bsr:2x2")
    pattern, fwd_perm, fwd_index, _, _, lay, _ = layer._placed
    b = torch.randn(12, 3, dtype=torch.float64)
    torch.library.opcheck(
        torch.ops.sparsecomp.layout_mm.default,
        (layer.values.detach(), b, fwd_perm, fwd_index, lay, [10, 12]),
    )
    x, y = torch.randn(10, 4, dtype=torch.float64), torch.randn(12, 4, dtype=torch.float64)
    torch.library.opcheck(torch.ops.sparsecomp.sddmm.default, (pattern, x, y, [10, 12]))
    rows, cols = np.nonzero(layer.weight.detach().numpy())
    got = torch.ops.sparsecomp.sddmm(pattern, x, y, [10, 12])
    torch.testing.assert_close(got, (x @ y.T)[rows, cols])


def test_compile_fullgraph_has_no_graph_break() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    st.sparsify_(model, {"0": ("random_fraction:0.8", "csr"), "2": ("nm:1:4", "nm:1:4")})
    x = torch.randn(4, 6, 16)
    explained = torch._dynamo.explain(model)(x)
    assert explained.graph_break_count == 0
    assert explained.graph_count == 1
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), model(x))
    compiled(x).sum().backward()
    assert model[0].values.grad is not None
    assert model[0].values.grad.shape == model[0].values.shape


def test_compile_after_an_eager_training_step() -> None:
    """Tracing keeps out of the shared-transpose state: after an eager backward
    the last transpose's source is a non-leaf (GELU's output), which dynamo
    refused to wrap (a warning turned error) when the trace looked at it."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    st.sparsify_(model, {"0": ("random_fraction:0.8", "csr"), "2": ("nm:1:4", "nm:1:4")})
    x = torch.randn(4, 100, 16)  # 400 rows: the blocked transposes
    model(x).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch._dynamo.explain(model)(x).graph_break_count == 0
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        got = compiled(x)
    torch.testing.assert_close(got, model(x))
    got.sum().backward()


def test_torch_sparse_operands_and_results() -> None:
    exe = kernels.program("spmm", torch.float32)
    a = sp.random(9, 7, density=0.3, format="csr", dtype=np.float32, random_state=1)
    b = torch.randn(7, 4)
    dense = torch.from_numpy(a.toarray())
    for t in (
        dense.to_sparse_csr(),
        dense.to_sparse_coo(),
        dense.to_sparse_csc(),
        torch.from_numpy(np.pad(a.toarray(), ((0, 1), (0, 1)))).to_sparse_bsr((2, 2)),
    ):
        rows = t.shape[0]
        bb = torch.nn.functional.pad(b, (0, 0, 0, t.shape[1] - 7))
        out = torch.empty(rows, 4)
        assert call(exe, t, bb, out=out) is out
        torch.testing.assert_close(out, t.to_dense() @ bb, rtol=1e-5, atol=1e-5)
    result = call(exe, dense.to_sparse_csr(), b)
    assert isinstance(result, torch.Tensor)
    packed = from_torch(dense.to_sparse_csr())
    for layout in ("csr", "csc", "coo", "bsr:3x1"):
        back = to_torch(packed, layout)
        torch.testing.assert_close(back.to_dense(), dense)


def test_dense_tensors_share_memory_with_the_call() -> None:
    x = torch.randn(5, 3)
    assert np.shares_memory(from_torch(x), x.numpy())
    out = torch.empty(3, 3)
    exe = kernels.program("spmm", torch.float32)
    a = torch.eye(3).to_sparse_csr()
    call(exe, a, torch.ones(3, 3), out=out)
    assert torch.equal(out, torch.ones(3, 3))


def test_calls_refuse_tensors_they_cannot_use() -> None:
    exe = kernels.program("spmm", torch.float32)
    with pytest.raises(SparsecompError, match="argument 1 is a tensor on meta"):
        call(exe, torch.eye(3).to_sparse_csr(), torch.empty(3, 3, device="meta"))
    with pytest.raises(SparsecompError, match=r"must be contiguous: shape \(3, 3\)"):
        call(exe, torch.eye(3).to_sparse_csr(), torch.ones(3, 3), out=torch.empty(3, 3).t())


def test_sparse_activation_linear_matches_torch_and_gradchecks() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(24, 10).double()
    layer = st.SparseActivationLinear(linear, threshold=0.2)
    x = torch.randn(3, 5, 24, dtype=torch.float64, requires_grad=True)
    g = torch.nn.functional.gelu(x)
    ref = linear(g * (g.abs() >= 0.2))
    torch.testing.assert_close(layer(x), ref)
    assert ((g.abs() < 0.2) & (g != 0)).any()  # the threshold dropped something
    assert torch.autograd.gradcheck(lambda inp: layer(inp), (x[:1, :2].detach().requires_grad_(),))
    args = (
        x.detach().reshape(-1, 24),
        linear.weight.detach().t().contiguous(),
        linear.bias.detach(),
        0.2,
    )
    torch.library.opcheck(torch.ops.sparsecomp.sparse_act_linear.default, args)


def test_sparsify_activations_in_a_bert_style_ffn() -> None:
    class Inter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = torch.nn.Linear(8, 16)
            self.intermediate_act_fn = torch.nn.GELU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.intermediate_act_fn(self.dense(x))

    class Out(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = torch.nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.dense(x)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.intermediate, self.output = Inter(), Out()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.output(self.intermediate(x))

    block = Block()
    x = torch.randn(4, 8)
    h = torch.nn.functional.gelu(block.intermediate.dense(x))
    ref = block.output.dense(h * (h.abs() >= 0.1))
    assert st.sparsify_activations_(torch.nn.Sequential(block), 0.1) == ["0"]
    torch.testing.assert_close(block(x), ref, rtol=1e-4, atol=1e-5)
    assert torch._dynamo.explain(block)(x).graph_break_count == 0
    with pytest.raises(SparsecompError, match="no BERT-style FFN"):
        st.sparsify_activations_(torch.nn.Linear(2, 2), 0.1)


def test_calls_route_by_the_executables_device(repo) -> None:
    """A cuda: executable gets dense tensors as they are (CUDA ones through DLPack);
    without a driver here its call stops at the CUDA runtime, not at a CPU check."""
    import sparsecomp
    from sparsecomp.runtime.cuda import CudaUnavailableError
    from sparsecomp.torch.tensors import _device

    host = kernels.program("spmm", torch.float32)
    assert _device(host) == "host"
    assert _device(host.functions["spmm"]) == "host"
    gpu = sparsecomp.compile(str(repo / "examples" / "spmm.mlir"), target="cuda:sm_90")
    assert _device(gpu) == "cuda:sm_90"
    a = torch.eye(4).to_sparse()
    with pytest.raises(CudaUnavailableError):
        call(gpu, a, torch.ones(4, 2))


def test_layout_mm_refuses_a_bias_of_the_wrong_shape() -> None:
    layer = _layer("bsr:2x2")
    _, fwd_perm, fwd_index, _, _, lay, _ = layer._placed
    b = torch.randn(12, 3, dtype=torch.float64)
    bias = torch.randn(9, dtype=torch.float64)  # 10 rows
    with pytest.raises(SparsecompError, match=r"the bias must have shape \(10,\), got \(9,\)"):
        torch.ops.sparsecomp.layout_mm(
            layer.values.detach(), b, fwd_perm, fwd_index, lay, [10, 12], bias
        )


def test_call_speaks_torch_in_its_warning_and_dtype_hint() -> None:
    """Through st.call, a COO tensor's conversion warning named "a SparseTensor in coo",
    pointed at torch's Dynamo wrapper and advised SparseTensor.from_scipy; a wrong
    dtype's hint was numpy's .astype, which a tensor has not."""
    import warnings

    import sparsecomp
    from sparsecomp.errors import ArgumentError, ConversionWarning

    exe = sparsecomp.compile(Path(__file__).resolve().parents[2] / "examples" / "spmm.mlir")
    a = torch.rand(30, 20) * (torch.rand(30, 20) < 0.2)
    b = torch.randn(20, 4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = st.call(exe, a.to_sparse(), b)
    torch.testing.assert_close(got, a @ b, rtol=1e-5, atol=1e-5)
    said = [w for w in seen if issubclass(w.category, ConversionWarning)]
    assert len(said) == 1, [w.message for w in said]
    assert said[0].filename == __file__, said[0].filename
    assert "a torch.sparse COO tensor" in str(said[0].message)
    assert "t.to_sparse_csr()" in str(said[0].message)
    with pytest.raises(ArgumentError, match="expected dtype float32, got float64") as info:
        st.call(exe, a.double().to_sparse_csr(), b)
    assert info.value.hint == "convert the tensor with .to(torch.float32)"
