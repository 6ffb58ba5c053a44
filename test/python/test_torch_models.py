"""sparsecomp.torch on models and call patterns written the way PyTorch users write them.

Each case was a bug found by a battery of such programs (session 42): residual
blocks that add into their input in inference mode, manual SGD through
``.data``, a layer shared by two parents, ``.view`` on a layer's output, copies
of models whose ``"auto"`` layers have not chosen yet, ``nn.TransformerEncoderLayer``'s
fused fast path, second-order gradients, degenerate inputs and autocast; and
(session 43) GNN, mixer and training-loop programs: TorchScript, re-sparsifying
while the previous step's graph is alive, SparseMatrix under autocast. Every
result is compared with dense torch holding the same masked weights.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import sparsecomp.torch as st
from sparsecomp.errors import SparsecompError


def _dense_copy(model: nn.Module) -> nn.Module:
    ref = copy.deepcopy(model)
    st.densify_(ref)
    return ref


class _Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x += self.fc1(x)  # fc1 reads x, then x changes in place
        x += self.fc2(x)  # fc2 must read the new x
        return x


@pytest.mark.parametrize("layout", ["csr", "hyb"])
def test_inference_mode_residual_that_adds_into_its_input(layout: str) -> None:
    """Inference tensors have no version counter: the rows stacked for fc2 and the
    transpose fc1 took were computed from x before it changed."""
    torch.manual_seed(0)
    model = _Residual()
    st.sparsify_(model, {"*": ("scalar_fraction:0.8", layout)})
    ref = _dense_copy(model)
    for _ in range(3):  # the second call on stacks fc1 and fc2 (learned on the first)
        x = torch.randn(4, 16)
        with torch.inference_mode():
            got, want = model(x.clone()), ref(x.clone())
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_sparse_activation_linear_sees_a_weight_changed_through_data() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(32, 16)
    layer = st.SparseActivationLinear(linear, 0.1)
    x = torch.randn(5, 32)

    def reference() -> torch.Tensor:
        g = F.gelu(x)
        return (g * (g.abs() >= 0.1)) @ linear.weight.T + linear.bias

    with torch.no_grad():
        layer(x)  # keeps weight^T
        linear.weight.data -= 0.5  # manual SGD: no version counter moves
        torch.testing.assert_close(layer(x), reference(), rtol=1e-4, atol=1e-5)


def _shared_model() -> tuple[nn.Module, nn.Linear]:
    fc = nn.Linear(16, 16)

    class WithAct(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.act = fc, nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.fc(x))

    class Plain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = fc

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = WithAct(), Plain()

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.a(x), self.b(x)

    return Model(), fc


def test_a_shared_layer_stays_shared_and_is_not_fused() -> None:
    torch.manual_seed(0)
    model, _ = _shared_model()
    done = st.sparsify_(model, {"*": ("scalar_fraction:0.5", "csr")})
    assert list(done) == ["a.fc"]
    assert model.a.fc is model.b.fc
    assert isinstance(model.a.fc, st.SparseLinear)
    ref = _dense_copy(model)
    assert ref.a.fc is ref.b.fc
    assert isinstance(ref.a.fc, nn.Linear)
    with pytest.raises(SparsecompError, match=r"used in several places \(a\.fc, b\.fc\)"):
        st.fuse_activations_(model)  # b's output would get a's ReLU
    x = torch.randn(4, 16)
    with torch.no_grad():
        for got, want in zip(model(x), ref(x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_sparsify_a_bare_linear_says_to_wrap_it() -> None:
    with pytest.raises(SparsecompError, match=r"wrap a bare nn\.Linear in a model"):
        st.sparsify_(nn.Linear(8, 8), {"*": "scalar_fraction:0.5"})


@pytest.mark.parametrize("layout", ["csr", "bsr:2x2", "nm:2:4"])
def test_outputs_of_layers_sharing_an_input_are_contiguous(layout: str) -> None:
    """From the second call on the two layers run as one stacked kernel: each output
    is its own contiguous tensor, as nn.Linear's is (``.view(-1)`` failed)."""

    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x).view(-1) + self.b(x).view(-1)

    torch.manual_seed(0)
    model = TwoHeads()
    st.sparsify_(model, {"*": ("nm:2:4" if layout == "nm:2:4" else "scalar_fraction:0.5", layout)})
    ref = _dense_copy(model)
    x = torch.randn(4, 8)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(model(x), ref(x), rtol=1e-4, atol=1e-5)


def _auto_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
    st.sparsify_(model, {"*": ("scalar_fraction:0.8", "auto")})
    return model


@pytest.mark.parametrize("how", ["deepcopy", "torch.save"])
def test_copies_of_a_model_with_unchosen_auto_layers_compile(how: str) -> None:
    torch.manual_seed(0)
    model = _auto_model()
    if how == "deepcopy":
        copied = copy.deepcopy(model)
    else:
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        copied = torch.load(buffer, weights_only=False)
    ref = _dense_copy(model)
    x = torch.randn(8, 32)
    with torch.no_grad():
        got = torch.compile(copied, fullgraph=True)(x)
        torch.testing.assert_close(got, ref(x), rtol=1e-4, atol=1e-5)
        assert model[0].layout == "auto"  # the copy chose for itself, not for the original
        copied(x)  # an eager call of the copy leaves the original's choice to it
        torch.testing.assert_close(torch.compile(model, fullgraph=True)(x), ref(x),
                                   rtol=1e-4, atol=1e-5)  # fmt: skip


def test_transformer_encoder_layer_runs_its_sparse_layers_in_eval(monkeypatch) -> None:
    """torch's fused fast path (eval, no grad) reads linear1.weight as a dense tensor;
    sparsify_ turns it off, so the sparse kernels run, and densify_ turns it on again."""
    calls = []
    forward = st.SparseLinear.forward

    def counted(layer: st.SparseLinear, x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return forward(layer, x)

    monkeypatch.setattr(st.SparseLinear, "forward", counted)
    torch.manual_seed(0)
    layers = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layers, 2, enable_nested_tensor=False)
    st.sparsify_(encoder, {"*linear*": ("scalar_fraction:0.8", "csr")})
    ref = _dense_copy(encoder).eval()
    encoder.eval()
    x = torch.randn(3, 7, 32)
    for mode in (torch.no_grad, torch.inference_mode):
        calls.clear()
        with mode():
            torch.testing.assert_close(encoder(x), ref(x), rtol=1e-4, atol=1e-5)
        assert len(calls) == 4  # two sparse layers in each of two encoder layers
    assert all(not m._forward_pre_hooks for m in ref.modules())


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")  # torch's
def test_an_encoder_with_a_padding_mask_keeps_plain_tensors() -> None:
    """``nn.TransformerEncoder`` (nested tensors on, the default) with a padding mask, in
    eval: its sparse layers get plain tensors and the result is the dense model's where
    it is defined (torch failed, "NestedTensorImpl doesn't support sizes"); ``densify_``
    gives the encoder its nested tensors back."""
    torch.manual_seed(0)
    layers = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layers, 2).eval()
    st.sparsify_(encoder, {"*.linear*": ("scalar_fraction:0.6", "bsr:4x1")})
    ref = _dense_copy(encoder).eval()
    x = torch.randn(3, 10, 64)
    mask = torch.zeros(3, 10, dtype=torch.bool)
    mask[0, 6:] = True
    with torch.no_grad():
        got, want = encoder(x, src_key_padding_mask=mask), ref(x, src_key_padding_mask=mask)
    keep = ~mask  # the padded positions: nested tensors give 0 there, the slow path not
    torch.testing.assert_close(got[keep], want[keep], rtol=1e-4, atol=1e-4)
    st.densify_(encoder)
    assert encoder.use_nested_tensor


def test_second_order_gradients_are_refused_clearly() -> None:
    model = nn.Sequential(nn.Linear(16, 8))
    st.sparsify_(model, {"*": ("scalar_fraction:0.5", "csr")})
    x = torch.randn(4, 16, requires_grad=True)
    (g,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)  # first order works
    want = torch.autograd.grad(_dense_copy(model)(x).sum(), x)[0]
    torch.testing.assert_close(g, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(SparsecompError, match="second-order gradient of that layer"):
        (g.norm() ** 2).backward()


def test_degenerate_inputs() -> None:
    layer = st.SparseLinear.from_dense(torch.randn(3, 1), torch.randn(3))
    with pytest.raises(SparsecompError, match="at least one dimension, got a 0-dim tensor"):
        layer(torch.tensor(1.0))
    weight, bias = torch.empty(3, 0), torch.randn(3)  # nn.Linear(0, 3)'s shapes
    sparse = st.SparseLinear.from_dense(weight, bias)
    x = torch.randn(2, 0)
    torch.testing.assert_close(sparse(x), F.linear(x, weight, bias))


def test_autocast_runs_a_sparse_layer_in_its_own_dtype() -> None:
    """Under CPU autocast to bfloat16 a dense layer's output comes in as bfloat16:
    the sparse layer takes it in float32, as torch's ops without a bfloat16 kernel do."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 16))
    st.sparsify_(model, {"2": "scalar_fraction:0.5"})
    ref = _dense_copy(model)
    x = torch.randn(4, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(x)
        hidden = ref[1](ref[0](x))
    want = hidden.float() @ ref[2].weight.T + ref[2].bias
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


# -- torch tensors in and out of executables, SparseMatrix -------------------------
def _spmv_and_sddmm() -> tuple[object, object]:
    import sparsecomp

    return (
        sparsecomp.compile("benchmarks/kernels/spmv.mlir"),
        sparsecomp.compile("benchmarks/kernels/sddmm.mlir"),
    )


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_to_torch_bsr_results() -> None:
    """A BSR result of a shape its blocks do not divide is an error (torch's BSR
    tensors need whole blocks; it was built unchecked, with uninitialized memory),
    and plain ``bsr`` is 1 x 1 blocks (its name did not parse)."""
    _, sddmm = _spmv_and_sddmm()
    torch.manual_seed(0)
    mask = (torch.rand(6, 4) < 0.5).float()
    x, y = torch.randn(6, 2), torch.randn(4, 2)
    want = (x @ y.T) * mask
    for layout in ("bsr", "bsr:1x1", "bsr:2x2", "bsr:3x4"):
        got = st.call(sddmm, mask.to_sparse_csr(), x, y, sparse_layout=layout)
        assert got.layout == torch.sparse_bsr
        torch.testing.assert_close(got.to_dense(), want)
    with pytest.raises(SparsecompError, match=r"does not split into 4 x 4 blocks"):
        st.call(sddmm, mask.to_sparse_csr(), x, y, sparse_layout="bsr:4x4")


def test_call_out_is_an_in_place_write_autograd_sees() -> None:
    import numpy as np
    import scipy.sparse as sp

    spmv, _ = _spmv_and_sddmm()
    a = sp.random(5, 5, density=0.5, format="csr", dtype=np.float32, random_state=0)
    w, buf = torch.ones(5, requires_grad=True), torch.ones(5)
    y = (w * buf).sum()  # autograd keeps buf for w's gradient
    st.call(spmv, a, torch.full((5,), 2.0), out=buf)
    torch.testing.assert_close(buf, torch.from_numpy(a @ np.full(5, 2.0, np.float32)))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    leaf = torch.zeros(5, requires_grad=True)
    with pytest.raises(SparsecompError, match="leaf tensor that requires grad"):
        st.call(spmv, a, torch.ones(5), out=leaf)


def test_tensors_sparsecomp_cannot_read_are_refused_clearly() -> None:
    import numpy as np
    import scipy.sparse as sp

    spmv, _ = _spmv_and_sddmm()
    a = sp.random(8, 6, density=0.3, format="csr", dtype=np.float32, random_state=0)
    with pytest.raises(SparsecompError, match=r"argument 1 is a torch\.bfloat16 tensor"):
        st.call(spmv, a, torch.ones(6, dtype=torch.bfloat16))
    hybrid = torch.randn(30, 20).to_sparse(1)  # one sparse, one dense dimension
    with pytest.raises(SparsecompError, match=r"hybrid torch\.sparse tensor"):
        st.from_torch(hybrid)
    with pytest.raises(SparsecompError, match="got a dense tensor"):
        st.SparseMatrix(torch.eye(4))
    with pytest.raises(SparsecompError, match="float32 or float64 values, got int32"):
        st.SparseMatrix(sp.eye(4, dtype=np.int32, format="csr"))


@pytest.mark.parametrize("layout", ["csr", "bsr:4x1", "hyb"])
def test_sparse_matrix_takes_b_as_it_is(layout: str, monkeypatch) -> None:
    """``A @ B`` reads a contiguous ``B`` in place (its row-major layouts copied
    ``B^T`` to a contiguous matrix at every call) and returns a contiguous result."""
    import numpy as np
    import scipy.sparse as sp

    from sparsecomp.torch import ops

    seen = []
    host_array = ops.host_array

    def recorded(t: torch.Tensor, what: str, dtype: torch.dtype | None = None) -> object:
        seen.append((what, t.is_contiguous(), t.data_ptr()))
        return host_array(t, what, dtype)

    monkeypatch.setattr(ops, "host_array", recorded)
    a = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=1)
    b = torch.randn(20, 8)
    got = st.SparseMatrix(a, layout)(b)
    torch.testing.assert_close(got, torch.from_numpy(a.toarray()) @ b, rtol=1e-4, atol=1e-5)
    assert got.is_contiguous()
    assert ("the dense operand", True, b.data_ptr()) in seen


# -- HuggingFace model families (a third battery) ---------------------------------
def _quiet_transformers():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return transformers


def _tiny_bert(hidden_act: str = "gelu") -> nn.Module:
    t = _quiet_transformers()
    config = t.BertConfig(num_hidden_layers=1, hidden_size=32, intermediate_size=64,
                          num_attention_heads=4, vocab_size=50, hidden_act=hidden_act)  # fmt: skip
    return t.BertModel(config).eval()


@pytest.mark.parametrize("act", ["gelu_new", "quick_gelu"])
def test_sparsify_activations_refuses_a_gelu_it_would_compute_differently(act: str) -> None:
    """The kernel computes the erf GELU: other GELUs were taken by their class name
    and silently replaced (a BERT's output moved by up to 2.5e-2 at threshold 0)."""
    torch.manual_seed(0)
    model = _tiny_bert(act)
    with pytest.raises(SparsecompError, match=r"left: encoder\.layer\.0: "):
        st.sparsify_activations_(model, 0.0)
    exact = _tiny_bert("gelu")
    ids = torch.randint(0, 50, (2, 5))
    with torch.no_grad():
        before = exact(ids).last_hidden_state
        assert st.sparsify_activations_(exact, 0.0) == ["encoder.layer.0"]
        torch.testing.assert_close(exact(ids).last_hidden_state, before, rtol=1e-4, atol=1e-5)


def test_auto_layout_under_torch_compile_with_a_graph_break() -> None:
    """Dynamo traces the frame again after a graph break; the layer chosen in the
    first trace took another branch in the second (SpeculationLogDivergence)."""

    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            torch._dynamo.graph_break()
            return y * 2

    torch.manual_seed(0)
    model = Broken()
    st.sparsify_(model, {"fc": ("scalar_fraction:0.8", "auto")})
    ref = _dense_copy(model)
    x = torch.randn(8, 16)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model)(x), ref(x), rtol=1e-4, atol=1e-5)


def test_export_of_an_unchosen_auto_layer_says_what_to_do() -> None:
    model = _auto_model()
    x = torch.randn(8, 32)
    with pytest.raises(SparsecompError, match="call the model once before exporting"):
        torch.export.export(model, (x,))
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(torch.export.export(model, (x,)).module()(x), want)


def test_a_bfloat16_model_is_sparsified_and_refused_at_its_call() -> None:
    model = nn.Sequential(nn.Linear(16, 8)).to(torch.bfloat16)
    st.sparsify_(model, {"*": "scalar_fraction:0.5"})  # numpy holds no bfloat16
    assert model[0].values.dtype == torch.bfloat16
    with pytest.raises(SparsecompError, match="kernels for float32, float64 values, not bfloat16"):
        model(torch.randn(2, 16, dtype=torch.bfloat16))


def test_gpt2_conv1d_layers_are_sparsified() -> None:
    """GPT-2's linear layers are transformers' Conv1D (``x @ W + b``, ``W`` in x out):
    they were left dense without a word, the rule matching nothing."""
    t = _quiet_transformers()
    torch.manual_seed(0)
    config = t.GPT2Config(n_layer=1, n_embd=32, n_head=4, vocab_size=50, n_positions=32,
                          bos_token_id=0, eos_token_id=0)  # fmt: skip
    model = t.GPT2LMHeadModel(config).eval()
    with pytest.warns(UserWarning, match="lm_head .its weight is tied"):
        done = st.sparsify_(model, {"*": ("scalar_fraction:0.8", "csr")})
    assert sorted(done) == [f"transformer.h.0.{n}" for n in
                            ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]  # fmt: skip
    ref = _dense_copy(model)
    assert type(ref.transformer.h[0].mlp.c_fc).__name__ == "Conv1D"
    t.GPT2LMHeadModel(config).load_state_dict(ref.state_dict())  # the dense model's own keys
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(model(ids).logits, ref(ids).logits, rtol=1e-4, atol=1e-5)
        got = model.generate(ids[:1], max_new_tokens=4, do_sample=False, pad_token_id=0)
        assert torch.equal(got, ref.generate(ids[:1], max_new_tokens=4, do_sample=False,
                                             pad_token_id=0))  # fmt: skip


def test_save_pretrained_and_load_into_a_sparsified_model(tmp_path) -> None:
    """A layer's extra state is a tensor (a dict failed in safetensors' sharding)."""
    safetensors = pytest.importorskip("safetensors.torch")
    torch.manual_seed(0)
    model = _tiny_bert()
    st.sparsify_(model, {"*": ("scalar_fraction:0.8", "bsr:4x1")})
    model.save_pretrained(tmp_path)
    fresh = _tiny_bert()
    st.sparsify_(fresh, {"*": ("scalar_fraction:0.5", "csr")})
    fresh.load_state_dict(safetensors.load_file(str(tmp_path / "model.safetensors")))
    assert fresh.encoder.layer[0].intermediate.dense.layout == "bsr:4x1"
    ids = torch.randint(0, 50, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids).last_hidden_state, model(ids).last_hidden_state)


def test_fuse_says_when_fx_cannot_trace_a_forward() -> None:
    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.act = nn.Linear(8, 8), nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:  # data-dependent: fx cannot trace it
                return self.act(self.fc(x))
            return self.act(self.fc(-x))

    model = nn.Sequential(Branchy())
    st.sparsify_(model, {"*": ("scalar_fraction:0.5", "csr")})
    with pytest.raises(SparsecompError, match=r"torch\.fx could not trace the forward of 0"):
        st.fuse_activations_(model)


def test_weight_reads_follow_the_pattern() -> None:
    """``SparseLinear.weight`` keeps its entries' dense positions between reads (T5 reads
    it at every forward pass): a pattern loaded in place, with as many entries, must
    show at the next read."""
    torch.manual_seed(0)
    w = torch.randn(6, 8)
    first = st.SparseLinear.from_dense(w, None, "csr", torch.rand(6, 8) < 0.5)
    other = st.SparseLinear.from_dense(w, None, "csr", torch.rand(6, 8) < 0.5)
    while other.values.shape != first.values.shape:  # as many entries: loaded in place
        other = st.SparseLinear.from_dense(w, None, "csr", torch.rand(6, 8) < 0.5)
    assert not torch.equal(first.weight, other.weight)
    first.load_state_dict(other.state_dict())
    torch.testing.assert_close(first.weight, other.weight)
    (first.weight.sum()).backward()  # gradients still flow to the values
    assert first.values.grad is not None
    torch.testing.assert_close(first.values.grad, torch.ones_like(first.values))


# -- a battery of GNN, mixer and training-loop programs (session 43) --------------------


@pytest.mark.filterwarnings("ignore:.*torch.jit.*is deprecated.*:DeprecationWarning")
def test_jit_trace_and_script_are_refused() -> None:
    """torch.jit.trace under no_grad recorded the example's output as a constant and
    returned it for every input; TorchScript failed inside torch on our annotations."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    st.sparsify_(model, {"*": "scalar_fraction:0.5"})
    model.eval()
    with torch.no_grad(), pytest.raises(SparsecompError, match=r"torch\.jit\.trace"):
        torch.jit.trace(model, torch.randn(4, 16))
    with pytest.raises(SparsecompError, match=r"torch\.jit\.script"):
        torch.jit.script(model)
    torch.testing.assert_close(model(torch.ones(2, 16)), _dense_copy(model)(torch.ones(2, 16)))


def test_resparsify_while_the_previous_loss_is_alive() -> None:
    """A loop that writes `loss = ...` keeps the previous graph until the next
    assignment: the first backward after a re-sparsification reused the parameter's
    stale gradient accumulator ("got [192] but expected [224]")."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 5))
    st.sparsify_(model, {"*": "scalar_fraction:0.3"})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    pruner = st.ResparsifyEvery(
        model, opt, every=2, schedule=lambda s: f"scalar_fraction:{0.3 + 0.05 * s:.2f}"
    )
    x, y = torch.randn(64, 32), torch.randint(0, 5, (64,))
    counts = []
    for _ in range(6):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        pruner.step()
        counts.append(model[0].values.numel())
    assert counts[-1] < counts[0]  # pruned as it trained
    torch.testing.assert_close(model(x), _dense_copy(model)(x), rtol=1e-4, atol=1e-5)


def test_load_another_pattern_while_an_output_is_alive() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 12))
    st.sparsify_(model, {"*": "scalar_fraction:0.5"})
    other = nn.Sequential(nn.Linear(24, 12))
    st.sparsify_(other, {"*": "scalar_fraction:0.8"})
    x = torch.randn(5, 24)
    kept = model(x).sum()  # a graph holding model's values
    model.load_state_dict(other.state_dict())
    out = model(x).sum()
    out.backward()
    assert model[0].values.grad.shape == model[0].values.shape
    torch.testing.assert_close(model(x), other(x))
    del kept


@pytest.mark.filterwarnings("ignore:.*Sparse CSR tensor support is in beta.*")
def test_sparse_matrix_under_autocast_and_bad_operands() -> None:
    """A row-major SparseMatrix (csr) under autocast takes a bf16 B in its own dtype,
    as SparseLinear and the hyb layout did; a torch.sparse B and an integer weight are
    refused clearly."""
    torch.manual_seed(0)
    a = torch.randn(6, 5) * (torch.rand(6, 5) < 0.5)
    b = torch.randn(5, 3)
    layer = st.SparseMatrix(a.to_sparse_csr())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = layer(b.to(torch.bfloat16))
    torch.testing.assert_close(got, a @ b.to(torch.bfloat16).float(), rtol=1e-4, atol=1e-5)
    with pytest.raises(SparsecompError, match="takes a dense B"):
        layer(b.to_sparse())
    with pytest.raises(SparsecompError, match="floating-point values"):
        st.SparseLinear.from_dense(torch.ones(3, 4, dtype=torch.int64))


def test_an_exported_sparse_model_saves(tmp_path) -> None:
    """torch.export.save failed on a csr/n:m/hyb layer ("numel: integer multiplication
    overflow"): its empty index tensors came from numpy."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 8))
    st.sparsify_(model, {"*": ("scalar_fraction:0.5", "csr")})
    x = torch.randn(3, 16)
    program = torch.export.export(model, (x,))
    torch.export.save(program, tmp_path / "model.pt2")
    loaded = torch.export.load(tmp_path / "model.pt2")
    torch.testing.assert_close(loaded.module()(x), model(x))


def test_sparsify_a_meta_model_says_what_to_do() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(8, 4))
    with pytest.raises(SparsecompError, match="meta tensors"):
        st.sparsify_(model, {"*": "scalar_fraction:0.5"})


# -- torch tensors in executables (a third battery, session 43) ----------------------------

_SPMV = Path(__file__).resolve().parents[2] / "examples" / "spmv.mlir"


@pytest.mark.filterwarnings("ignore:.*Sparse CSR tensor support is in beta.*")
def test_call_under_torch_compile_runs_eagerly() -> None:
    """Dynamo traced into st.call's conversions and failed ("Expected np.nditer base")."""
    import sparsecomp

    exe = sparsecomp.compile(_SPMV)
    a = (torch.randn(6, 5) * (torch.rand(6, 5) < 0.5)).to_sparse_csr()
    x = torch.randn(5)
    compiled = torch.compile(lambda a, x: st.call(exe, a, x) * 2.0, backend="eager")
    torch.testing.assert_close(compiled(a, x), 2.0 * (a.to_dense() @ x))


def test_half_sparse_results_keep_their_dtype_in_every_layout() -> None:
    import sparsecomp
    from sparsecomp.formats import SparseTensor

    dense = torch.tensor([[1.0, 0.0, 2.5], [0.0, 3.0, 0.0]], dtype=torch.float16)
    tensor = SparseTensor.from_dense(dense.numpy(), "csr")
    for layout in ("csr", "csc", "coo", "bsr"):
        got = st.to_torch(tensor, layout)
        assert got.dtype == torch.float16, layout
        torch.testing.assert_close(got.to_dense(), dense)
    del sparsecomp


def test_sparse_act_linear_takes_thresholds_python_writes_with_exponents() -> None:
    """repr(1e-05) is '1e-05', which the kernel's MLIR text did not parse."""
    torch.manual_seed(0)
    linear = nn.Linear(16, 8)
    for threshold in (1e-5, 1e-8, 0.25):
        layer = st.SparseActivationLinear(linear, threshold)
        x = torch.randn(4, 16)
        gelu = F.gelu(x)
        want = linear(torch.where(gelu.abs() >= threshold, gelu, torch.zeros(())))
        torch.testing.assert_close(layer(x), want, rtol=1e-4, atol=1e-5)


def test_layout_mm_refuses_values_of_another_length() -> None:
    """A gathered layout (bsr, hyb, ell) read a short values tensor's last entries as
    fill zeros and ignored a long one's extra entries."""
    torch.manual_seed(7)
    w, keep = torch.randn(10, 12), torch.rand(10, 12) < 0.4
    b = torch.randn(12, 5)
    for layout in ("bsr:2x2", "hyb", "ell"):
        layer = st.SparseLinear.from_dense(w, None, layout, keep)
        _, perm, index, _, _, placed, _ = layer._placed
        values = layer.values.detach()
        got = torch.ops.sparsecomp.layout_mm(values, b, perm, index, placed, [10, 12])
        torch.testing.assert_close(got, layer.weight.detach() @ b, rtol=1e-4, atol=1e-5)
        for wrong in (values[:-1], torch.cat([values, values[:1]])):
            with pytest.raises(SparsecompError, match="values must be 1-D"):
                torch.ops.sparsecomp.layout_mm(wrong, b, perm, index, placed, [10, 12])


_TWO = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32,
                           crdWidth = 32}>
func.func @two(%x: tensor<?x?xf32>, %A: tensor<?x?xf32, #csr>)
    -> (tensor<?x?xf32, #csr>, tensor<?x?xf32>) {
  return %A, %x : tensor<?x?xf32, #csr>, tensor<?x?xf32>
}
"""


@pytest.mark.filterwarnings("ignore:.*Sparse CSR tensor support is in beta.*")
def test_call_out_with_none_returns_the_result_it_names_no_tensor_for() -> None:
    """st.call(..., out=(None, t)) returned (None, t): the sparse result was lost."""
    import sparsecomp

    exe = sparsecomp.compile(_TWO)
    a, x = torch.eye(4), torch.randn(4, 4)
    into = torch.empty(4, 4)
    got = st.call(exe, x, a.to_sparse_csr(), out=(None, into))
    assert got[1] is into
    torch.testing.assert_close(got[0].to_dense(), a)
    torch.testing.assert_close(into, x)


# -- session 44: training workflows -------------------------------------------------


def _sparse_linear(fraction: float, layout: str = "csr", seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 24))
    st.sparsify_(model, {"0": (f"scalar_fraction:{fraction}", layout)})
    return model


def test_loading_another_patterns_size_drops_the_stale_gradient() -> None:
    """values.grad kept the old pattern's size after load_state_dict: the next backward
    (after zero_grad(set_to_none=False)) failed, and a compiled model's forward."""
    checkpoint = _sparse_linear(0.9).state_dict()
    model = _sparse_linear(0.5)
    model(torch.randn(4, 32)).sum().backward()
    model.load_state_dict(checkpoint)
    assert model[0].values.grad is None
    model.zero_grad(set_to_none=False)
    x = torch.randn(4, 32)
    model(x).sum().backward()
    ref = _dense_copy(model)
    ref[0].weight.grad = None
    ref(x).sum().backward()
    dense_grad = ref[0].weight.grad
    assert dense_grad is not None
    weight = model[0].to_dense_linear().weight
    got = torch.zeros_like(weight).masked_scatter(weight != 0, model[0].values.grad)
    torch.testing.assert_close(got, dense_grad * (weight != 0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["csr", "hyb", "bsr:1x4"])
def test_input_gradient_after_requires_grad_between_two_layers(layout: str) -> None:
    """Another layer's forward took the transpose of x; x.requires_grad_() changed no
    version counter, so the second layer reused that transpose, which has no autograd
    link to x (layouts computing Y^T = W X^T): x.grad stayed None."""
    sparsifier = "block_fraction:1x4:0.5" if layout.startswith("bsr") else "scalar_fraction:0.5"
    torch.manual_seed(1)
    teacher, student = nn.Linear(32, 16), nn.Linear(32, 16)
    teacher_s, student_s = nn.Sequential(teacher), nn.Sequential(student)
    st.sparsify_(teacher_s, {"0": (sparsifier, layout)})
    st.sparsify_(student_s, {"0": (sparsifier, layout)})
    dense = student_s[0].to_dense_linear()
    x = torch.randn(5, 32)
    teacher_s(x)
    x.requires_grad_()
    student_s(x).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    dense(x2).sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)


def test_batched_gradients_are_refused_with_what_works() -> None:
    """is_grads_batched (jacobian(vectorize=True)) stopped at torch's "Batching rule not
    implemented for sparsecomp::sddmm"; torch.func.vmap over autograd.grad works."""
    model = _sparse_linear(0.5)
    dense = model[0].to_dense_linear()
    x = torch.randn(3, 32, requires_grad=True)
    v = torch.randn(4, 3, 24)
    with pytest.raises(SparsecompError, match="batched gradients"):
        torch.autograd.grad(model(x), x, v, is_grads_batched=True)
    got = torch.func.vmap(lambda u: torch.autograd.grad(model(x), x, u)[0])(v)
    (want,) = torch.autograd.grad(dense(x), x, v, is_grads_batched=True)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


class _Scaled(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 3.0 * super().forward(x)


def test_linear_subclasses_with_their_own_forward_stay_dense() -> None:
    """A subclass scaling its output (or torch's qat.Linear) became a plain SparseLinear,
    silently dropping what its forward does."""
    torch.manual_seed(2)
    model = nn.Sequential(_Scaled(16, 8), nn.Linear(8, 4))
    x = torch.randn(3, 16)
    want = model(x)
    with pytest.warns(UserWarning, match="has a forward of its own"):
        done = st.sparsify_(model, {"*": "threshold:0"})
    assert set(done) == {"1"}
    assert isinstance(model[0], _Scaled)
    torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-5)


# -- session 44: sparse matrices as data ----------------------------------------------


def _graph(n: int = 40, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, n, (2, 4 * n), generator=g)
    values = torch.rand(4 * n, generator=g)
    return torch.sparse_coo_tensor(edges, values, (n, n), check_invariants=True).coalesce()


def test_sparse_matrix_auto_gives_a_contiguous_result_from_its_first_call() -> None:
    """An "auto" SparseMatrix's first call returned a transposed view (y.view(-1)
    failed); its later calls were contiguous, as docs/torch.md says."""
    a = _graph()
    s = st.SparseMatrix(a, "auto")
    b = torch.randn(40, 8)
    for _ in range(2):
        y = s(b)
        assert y.is_contiguous()
        torch.testing.assert_close(y, a.to_dense() @ b, rtol=1e-4, atol=1e-5)


def test_sparse_matrix_says_what_it_copies_and_refuses_half() -> None:
    """Values that require grad lost their gradient silently (SparseMatrix copies them);
    a float16 matrix became float32 silently."""
    a = _graph()
    w = a.values().clone().requires_grad_()
    weighted = torch.sparse_coo_tensor(a.indices(), w, a.shape, check_invariants=True)
    with pytest.warns(UserWarning, match="copies the matrix's values"):
        st.SparseMatrix(weighted, trainable=True)
    with pytest.raises(SparsecompError, match=r"float32 or float64 values, got torch\.float16"):
        st.SparseMatrix(a.to(torch.float16))


def test_call_out_not_contiguous_is_named() -> None:
    """out= of a transposed tensor: "must be a contiguous dense CPU tensor, got
    torch.strided on cpu", which it was."""
    import numpy as np
    import scipy.sparse as sp

    import sparsecomp

    exe = sparsecomp.compile(Path(__file__).resolve().parents[2] / "examples" / "spmm.mlir")
    a = sp.random(16, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    b = torch.randn(20, 100)
    shape = r"must be contiguous: shape \(16, 100\) with strides"
    with pytest.raises(SparsecompError, match=shape):
        st.call(exe.spmm, a, b, out=torch.empty(100, 16).t())
