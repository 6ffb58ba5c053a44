"""Inference paths of sparsecomp.torch: activations fused into a layer's kernel
(``fuse_activations_``) and layers that read one input run stacked (``shared``).

Every result is compared with the same model run the plain way (torch's own
activation, each layer by itself) or with dense torch.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import sparsecomp.torch as st
from sparsecomp.errors import SparsecompError
from sparsecomp.torch import ops, shared


def _mlp(layout: str) -> nn.Sequential:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(24, 48), nn.GELU(), nn.Linear(48, 40), nn.ReLU(), nn.Linear(40, 8)
    )
    st.sparsify_(
        model, {"*": (("nm:1:4:8" if layout == "bsr:8x1" else "scalar_fraction:0.7"), layout)}
    )
    return model


@pytest.mark.parametrize("layout", ["csr", "bsr:8x1", "bsr:2x2"])
def test_fused_activations_equal_torch_with_and_without_autograd(layout: str) -> None:
    model = _mlp(layout)
    plain = copy.deepcopy(model)
    assert st.fuse_activations_(model) == ["0", "2"]
    assert isinstance(model[1], nn.Identity)
    assert isinstance(model[3], nn.Identity)
    assert (model[0].activation, model[2].activation, model[4].activation) == ("gelu", "relu", "")
    x = torch.randn(3, 33, 24)
    with torch.no_grad():  # the kernels apply them
        torch.testing.assert_close(model(x), plain(x), rtol=1e-5, atol=1e-5)
    xg = x.clone().requires_grad_()
    xp = x.clone().requires_grad_()
    torch.testing.assert_close(model(xg), plain(xp), rtol=1e-5, atol=1e-5)
    model(xg).sum().backward()
    plain(xp).sum().backward()
    torch.testing.assert_close(xg.grad, xp.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model[0].values.grad, plain[0].values.grad, rtol=1e-4, atol=1e-5)
    # fusing again finds nothing new; densify_ puts the activations back
    assert st.fuse_activations_(model) == []
    st.densify_(model)
    assert isinstance(model[1], nn.GELU)
    assert isinstance(model[3], nn.ReLU)
    with torch.no_grad():
        torch.testing.assert_close(model(x), plain(x), rtol=1e-5, atol=1e-5)


def test_fusion_needs_a_direct_gelu_or_relu_module() -> None:
    class Functional(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return nn.functional.gelu(self.fc(x))

    for model in (
        Functional(),
        nn.Sequential(nn.Linear(8, 8), nn.GELU(approximate="tanh")),  # not the erf form
        nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1), nn.GELU()),  # not directly
        nn.Sequential(nn.Linear(8, 8), nn.Tanh()),
    ):
        st.sparsify_(model, {"*": "scalar_fraction:0.5"})
        with pytest.raises(SparsecompError, match="no SparseLinear feeds a GELU or ReLU"):
            st.fuse_activations_(model)


def test_fused_model_compiles_without_graph_break() -> None:
    model = _mlp("bsr:8x1")
    st.fuse_activations_(model)
    x = torch.randn(5, 24)
    with torch.no_grad():
        assert torch._dynamo.explain(model)(x).graph_break_count == 0
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        torch.testing.assert_close(compiled(x), model(x))


@pytest.mark.parametrize("activation", ["", "gelu", "relu"])
def test_opcheck_linear_with_an_activation(activation: str) -> None:
    torch.manual_seed(1)
    w = torch.randn(16, 12, dtype=torch.float64)
    layer = st.SparseLinear.from_dense(w, torch.randn(16, dtype=torch.float64), "bsr:8x1",
                                       st.mask_of(w, "nm:1:3:8"))  # fmt: skip
    _, perm, index, _, _, lay, _ = layer._placed
    x = torch.randn(9, 12, dtype=torch.float64)
    args = (layer.values.detach(), x, perm, index, lay, [16, 12], layer.bias.detach(), activation)
    torch.library.opcheck(torch.ops.sparsecomp.linear.default, args)
    z = x @ layer.weight.detach().T + layer.bias.detach()
    want = {"": z, "gelu": nn.functional.gelu(z), "relu": nn.functional.relu(z)}[activation]
    torch.testing.assert_close(torch.ops.sparsecomp.linear(*args), want)
    with pytest.raises(SparsecompError, match="no fused activation 'tanh'"):
        torch.ops.sparsecomp.linear(*args[:-1], "tanh")


def _projections(layout: str, bias: bool = True) -> list[st.SparseLinear]:
    torch.manual_seed(2)
    layers = []
    for _ in range(3):
        w = torch.randn(32, 24)
        keep = st.mask_of(w, "nm:1:4:8" if layout == "bsr:8x1" else "scalar_fraction:0.8")
        b = torch.randn(32) if bias else None
        layers.append(st.SparseLinear.from_dense(w, b, layout, keep))
    return layers


def _count_kernel_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    calls: list[list[int]] = []
    run = ops.run_linear

    def counted(*args, **kwargs):
        calls.append(list(args[5]))
        return run(*args, **kwargs)

    monkeypatch.setattr(ops, "run_linear", counted)
    return calls


@pytest.mark.parametrize("layout", ["csr", "bsr:8x1", "nm:1:4"])
def test_layers_reading_one_input_run_as_one_kernel(layout: str, monkeypatch) -> None:
    q, k, v = _projections("bsr:8x1" if layout == "bsr:8x1" else "csr")
    if layout == "nm:1:4":
        q, k, v = (
            st.SparseLinear.from_dense(m.weight, m.bias, layout, st.mask_of(m.weight, "nm:1:4"))
            for m in (q, k, v)
        )
    calls = _count_kernel_calls(monkeypatch)
    x = torch.randn(2, 20, 24)
    want = [x @ m.weight.detach().T + m.bias.detach() for m in (q, k, v)]
    with torch.no_grad():
        for round_ in range(3):
            calls.clear()
            got = [q(x), k(x), v(x)]
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
            # the first round learns (three calls); later ones stack (one, 96 rows)
            assert calls == ([[32, 24]] * 3 if round_ == 0 else [[96, 24]])


def test_stacked_rows_see_weights_changed_in_between(monkeypatch) -> None:
    q, k, v = _projections("bsr:8x1")
    with torch.no_grad():
        for _ in range(2):  # a model's forward passes: a new input each
            x = torch.randn(10, 24)
            q(x), k(x), v(x)
        calls = _count_kernel_calls(monkeypatch)
        x = torch.randn(10, 24)
        q(x)  # stacks q, k and v
        k.values.data.mul_(2)  # no version bump: compared, not trusted
        torch.testing.assert_close(k(x), x @ k.weight.T + k.bias, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(v(x), x @ v.weight.T + v.bias, rtol=1e-5, atol=1e-5)
    # k's stale rows are not taken: k runs its own chain (k, v), whose rows v takes
    assert calls == [[96, 24], [64, 24]]


def test_a_layer_called_with_another_input_is_not_stacked(monkeypatch) -> None:
    """Cross-attention's key and value read another tensor than its query: the
    query's link to the key is dropped when the key does not take its rows."""
    q, k, v = _projections("csr")
    x = torch.randn(6, 24)
    with torch.no_grad():
        for _ in range(2):
            q(x), k(x), v(x)
        calls = _count_kernel_calls(monkeypatch)
        for _ in range(3):
            y = torch.randn(6, 24)
            got = [q(x), k(y), v(y)]
            for g, m, inp in zip(got, (q, k, v), (x, y, y), strict=True):
                torch.testing.assert_close(g, inp @ m.weight.T + m.bias, rtol=1e-5, atol=1e-5)
    # round 1: q stacks q, k, v (k and v leave theirs), k and v run: 64 rows, then
    # round 2: q stacks again, its rows untaken drop the q -> k link; k stacks k, v
    assert calls[-2:] == [[32, 24], [64, 24]]
    assert shared._next.get(q) is None or shared._next[q]() is not k


def test_bert_layer_fused_and_stacked_equals_masked_dense() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(3)
    config = transformers.BertConfig(
        hidden_size=64, num_attention_heads=4, intermediate_size=128, num_hidden_layers=1
    )
    config._attn_implementation = "eager"
    layer = transformers.models.bert.modeling_bert.BertLayer(config).eval()
    dense = copy.deepcopy(layer)
    sparse = st.sparsify_(layer, {"*": st.Rule("nm:1:4:8", "bsr:8x1")})
    with torch.no_grad():
        for name, module in sparse.items():
            dense.get_submodule(name).weight.copy_(module.weight)
    assert st.fuse_activations_(layer) == ["intermediate.dense"]
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        want = dense(x)[0]
        for _ in range(3):  # learns, then stacks query, key and value
            torch.testing.assert_close(layer(x)[0], want, rtol=1e-4, atol=1e-4)
    q = layer.attention.self.query
    assert shared._next[q]() is layer.attention.self.key


@pytest.mark.parametrize("layout", ["bsr:8x1", "hyb"])
def test_inference_mode(layout: str) -> None:
    """Inference tensors have no version counter: the caches go by identity."""
    q, k, v = _projections("bsr:8x1")
    if layout == "hyb":
        q, k, v = (st.SparseLinear.from_dense(m.weight, m.bias, "hyb") for m in (q, k, v))
    mlp = _mlp("bsr:8x1")
    st.fuse_activations_(mlp)
    for _ in range(3):
        with torch.inference_mode():
            x = torch.randn(4, 24)
            got = [q(x), k(x), v(x), mlp(x)]
        with torch.no_grad():
            want = [x @ m.weight.T + m.bias for m in (q, k, v)]
            want.append(mlp(x.clone()))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["csr", "bsr:8x1"])
def test_threads_calling_the_same_layers(layout: str) -> None:
    """Staged operands, pending rows and learned links are shared between threads:
    each call still gets its own input's result."""
    from concurrent.futures import ThreadPoolExecutor

    q, k, v = _projections(layout)

    def forward(seed: int) -> bool:
        g = torch.Generator().manual_seed(seed)
        ok = True
        for _ in range(5):
            x = torch.randn(6, 24, generator=g)
            with torch.no_grad():
                got = [q(x), k(x), v(x)]
                want = [x @ m.weight.T + m.bias for m in (q, k, v)]
            ok &= all(torch.allclose(a, b, rtol=1e-5, atol=1e-5) for a, b in zip(got, want))
        return ok

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(forward, range(8)))


class _ReadsWeight(nn.Module):
    """T5's FFN: its forward reads the second layer's ``.weight`` (its dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.wi = nn.Linear(16, 32, bias=False)
        self.act = nn.ReLU()
        self.wo = nn.Linear(32, 16, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.act(self.wi(h))
        if isinstance(self.wo.weight, torch.Tensor) and h.dtype != self.wo.weight.dtype:
            h = h.to(self.wo.weight.dtype)
        return self.wo(h)


@pytest.mark.parametrize("run_first", [False, True])
def test_a_forward_reading_a_weight_fuses(run_first: bool) -> None:
    """torch.fx's trace (fuse_activations_) read .weight, which kept a mark made of fx
    proxies: every later forward failed; after a forward, the trace compared the kept
    mark with proxies and nothing fused ("data-dependent control flow")."""

    def make() -> nn.Module:
        torch.manual_seed(0)
        model = nn.Sequential(_ReadsWeight()).eval()
        st.sparsify_(model, {"*": ("scalar_fraction:0.7", "csr")})
        return model

    x = torch.randn(4, 16)
    with torch.no_grad():
        want = make()(x)
    model = make()
    if run_first:
        with torch.no_grad():
            model(x)
    assert st.fuse_activations_(model) == ["0.wi"]
    with torch.no_grad():
        torch.testing.assert_close(model(x), want)


def test_an_activation_the_kernels_do_not_compute_is_named() -> None:
    """GPT-2's gelu_new (the tanh GELU) was not fused, and the error named only the
    modules fx could not trace."""
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh"), nn.Linear(16, 4))
    st.sparsify_(model, {"*": ("scalar_fraction:0.5", "csr")})
    with pytest.raises(SparsecompError, match=r"after SparseLinear layers \(1 \(GELU\)\) compute"):
        st.fuse_activations_(model)
