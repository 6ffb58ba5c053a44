"""sparsecomp.torch's SparseLinear: results equal dense torch, gradients, state_dict, errors."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as hs

import sparsecomp.torch as st
from sparsecomp.errors import FormatError, SparsecompError

LAYOUTS = ["csr", "bsr:4x4", "bsr:2x8", "hyb", "ell", "dcsr"]


def _masked(rows: int, cols: int, sparsity: float, seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g, dtype=dtype)
    keep = torch.rand(rows, cols, generator=g) >= sparsity
    return w * keep, keep, torch.randn(rows, generator=g, dtype=dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward_equals_dense_torch(layout: str) -> None:
    w, keep, b = _masked(40, 36, 0.7, 1)
    layer = st.SparseLinear.from_dense(w, b, layout, keep)
    x = torch.randn(3, 5, 36)
    torch.testing.assert_close(layer(x), x @ w.T + b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["hyb", "bsr:1x4", "csr"])
@pytest.mark.parametrize("grad", [False, True])
def test_output_is_contiguous_as_nn_linears(layout: str, grad: bool) -> None:
    """hyb and bsr:1xC layers returned a transposed view: y.view(B, T * C), which
    merges the features with the dimension before them, failed."""
    w, keep, b = _masked(16, 16, 0.5, 2)
    layer = st.SparseLinear.from_dense(w, b, layout, keep)
    x = torch.randn(2, 8, 16, requires_grad=grad)
    with torch.set_grad_enabled(grad):
        y = layer(x)
    assert y.is_contiguous()
    torch.testing.assert_close(y.view(2, 8 * 16), (x @ w.T + b).view(2, 8 * 16))


def test_nm_layout_holds_an_nm_sparsified_weight() -> None:
    w = torch.randn(16, 32)
    keep = st.mask_of(w, "nm:2:4")
    layer = st.SparseLinear.from_dense(w, None, "nm:2:4", keep)
    x = torch.randn(7, 32)
    torch.testing.assert_close(layer(x), x @ (w * keep).T, rtol=1e-4, atol=1e-5)
    assert layer.values.shape[0] == 16 * 32 // 2


def test_nm_layout_refuses_a_pattern_it_cannot_hold() -> None:
    w, keep, _ = _masked(8, 16, 0.3, 2)
    with pytest.raises(FormatError, match="not 2:4"):
        st.SparseLinear.from_dense(w, None, "nm:2:4", keep)


@pytest.mark.parametrize("layout", ["csr", "bsr:2x4", "bsr:4x1", "hyb", "nm:2:4"])
def test_gradcheck_values_and_input(layout: str) -> None:
    w = torch.randn(12, 16, dtype=torch.float64)
    keep = st.mask_of(w, "nm:2:4" if layout.startswith("nm") else "random_fraction:0.6")
    layer = st.SparseLinear.from_dense(w, torch.randn(12, dtype=torch.float64), layout, keep)
    values = layer.values.detach().clone().requires_grad_()
    bias = layer.bias.detach().clone().requires_grad_()
    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)

    def f(v: torch.Tensor, b: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(layer, {"values": v, "bias": b}, (inp,))

    assert torch.autograd.gradcheck(f, (values, bias, x))


@pytest.mark.parametrize("shape", [(1024, 48), (300, 5), (129, 7), (5, 300)])
def test_transposed_matches_torch_with_gradients(shape: tuple[int, int]) -> None:
    """``transposed`` (by blocks of rows past 256 rows) equals ``x.t()``,
    and the gradient it passes back is the gradient's transpose."""
    from sparsecomp.torch.transpose import transposed

    x = torch.randn(*shape, requires_grad=True)
    y = transposed(x)
    assert y.is_contiguous()
    assert torch.equal(y, x.t())
    g = torch.randn_like(y)
    (y * g).sum().backward()
    assert x.grad is not None
    assert torch.equal(x.grad, g.t())


def test_weight_gradient_only_at_stored_entries() -> None:
    w, keep, b = _masked(20, 24, 0.8, 3)
    layer = st.SparseLinear.from_dense(w, b, "csr", keep)
    dense = torch.nn.Linear(24, 20)
    with torch.no_grad():
        dense.weight.copy_(w)
        dense.bias.copy_(b)
    x = torch.randn(9, 24)
    layer(x).square().sum().backward()
    dense(x).square().sum().backward()
    rows, cols = np.nonzero(keep.numpy())
    torch.testing.assert_close(
        layer.values.grad, dense.weight.grad[rows, cols], rtol=1e-4, atol=1e-4
    )
    torch.testing.assert_close(layer.bias.grad, dense.bias.grad, rtol=1e-4, atol=1e-4)
    assert layer.values.grad.shape == (int(keep.sum()),)


def test_sparsify_rules_select_modules_and_keep_the_rest_dense() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    done = st.sparsify_(model, {"0": ("scalar_fraction:0.5", "bsr:2x2")})
    assert list(done) == ["0"]
    assert isinstance(model[2], torch.nn.Linear)
    assert isinstance(model[0], st.SparseLinear)
    assert abs(model[0].density - 0.5) < 0.01
    dense_copy = torch.nn.Sequential(model[0].to_dense_linear(), model[1], model[2])
    torch.testing.assert_close(model(x), dense_copy(x), rtol=1e-4, atol=1e-5)
    assert st.densify_(model) == ["0"]
    torch.testing.assert_close(model(x), dense_copy(x), rtol=1e-4, atol=1e-5)


def test_sparsify_by_class_and_unmatched_rule_is_an_error() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    unmatched = r"no nn\.Linear \(or transformers Conv1D\) matched .encoder"
    with pytest.raises(SparsecompError, match=unmatched):
        st.sparsify_(model, {"encoder.*": "threshold:0.1"})
    done = st.sparsify_(model, {torch.nn.Linear: "threshold:0.1"})
    assert sorted(done) == ["0", "1"]
    with pytest.raises(SparsecompError, match="matched '1'; already a SparseLinear: 1") as info:
        st.sparsify_(model, {"1": "threshold:0.2"})  # it said only "the linear modules: "
    assert "resparsify_" in (info.value.hint or "")


def test_layers_read_as_dense_weights_are_left_dense_with_a_warning() -> None:
    """MultiheadAttention reads out_proj.weight itself, and a tied head shares its
    embedding's weight: sparse layers there would compute dense or untie them."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    with pytest.warns(UserWarning, match=r"left 1 selected nn\.Linear dense: self_attn\.out_proj"):
        done = st.sparsify_(layer, {torch.nn.Linear: "scalar_fraction:0.5"})
    assert sorted(done) == ["linear1", "linear2"]
    assert type(layer.self_attn.out_proj) is torch.nn.modules.linear.NonDynamicallyQuantizableLinear
    seen = []
    layer.linear1.register_forward_hook(lambda *_: seen.append(1))
    with torch.no_grad():
        layer(torch.randn(2, 5, 32))
    assert seen  # the sparse layers run (the encoder layer took its module path)

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(20, 8)
            self.body = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 20, bias=False)
            self.head.weight = self.embed.weight

    tied = Tied()
    with pytest.warns(UserWarning, match=r"head \(its weight is tied to embed\.weight\)"):
        done = st.sparsify_(tied, {"*": "scalar_fraction:0.5"})
    assert sorted(done) == ["body"]
    assert tied.head.weight is tied.embed.weight


def test_auto_layout_chooses_on_first_call() -> None:
    w, keep, b = _masked(64, 48, 0.9, 4)
    layer = st.SparseLinear.from_dense(w, b, "auto", keep)
    assert layer.layout == "auto"
    x = torch.randn(32, 48)
    torch.testing.assert_close(layer(x), x @ w.T + b, rtol=1e-4, atol=1e-5)
    assert layer.layout != "auto"
    assert layer.chosen.why


@pytest.mark.parametrize(("grad", "dynamic"), [(False, False), (True, False), (False, True)])
def test_auto_layout_chooses_while_torch_compile_traces(grad: bool, dynamic: bool) -> None:
    """A model whose ``auto`` layers were never called compiles whole: the
    first call's trace chooses each layer's layout, as an eager call would
    (for a batch rounded up to a power of two, also where it is symbolic)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.GELU(), torch.nn.Linear(48, 16))
    st.sparsify_(model, {torch.nn.Linear: ("random_fraction:0.8", "auto")})
    x = torch.randn(30, 64)
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    with torch.set_grad_enabled(grad):
        got = compiled(x)
        assert model[0].layout != "auto"
        assert model[2].layout != "auto"
        want = torch.nn.Sequential(model[0].to_dense_linear(), model[1], model[2].to_dense_linear())
        torch.testing.assert_close(got, want(x), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(compiled(x), want(x), rtol=1e-4, atol=1e-5)
    if grad:
        got.sum().backward()
        assert model[0].values.grad is not None
    fresh = torch.nn.Sequential(torch.nn.Linear(64, 48))
    st.sparsify_(fresh, {torch.nn.Linear: ("random_fraction:0.8", "auto")})
    assert torch._dynamo.explain(fresh)(x).graph_break_count == 0
    assert fresh[0].layout != "auto"


def test_state_dict_round_trip_in_a_fresh_process(tmp_path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 24), torch.nn.GELU(), torch.nn.Linear(24, 8))
    st.sparsify_(model, {"0": ("random_fraction:0.75", "hyb"), "2": ("nm:1:4", "nm:1:4")})
    x = torch.randn(6, 32)
    torch.save({"state": model.state_dict(), "x": x, "y": model(x)}, tmp_path / "m.pt")
    script = textwrap.dedent(f"""
        import torch, sparsecomp.torch as st
        saved = torch.load({str(tmp_path / "m.pt")!r}, weights_only=False)
        model = torch.nn.Sequential(torch.nn.Linear(32, 24), torch.nn.GELU(),
                                    torch.nn.Linear(24, 8))
        st.sparsify_(model, {{"0": "scalar_fraction:0.3", "2": "threshold:0.0"}})
        model.load_state_dict(saved["state"])
        assert "hyb" in repr(model[0]) and "nm:1:4" in repr(model[2]), repr(model)
        torch.testing.assert_close(model(saved["x"]), saved["y"], rtol=0, atol=0)
        print("same")
    """)
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "same" in run.stdout


def test_bad_inputs_are_clear_errors() -> None:
    w, keep, _ = _masked(8, 8, 0.5, 5)
    layer = st.SparseLinear.from_dense(w, None, "csr", keep)
    with pytest.raises(SparsecompError, match="float16"):
        layer.half()(torch.randn(2, 8, dtype=torch.float16))
    layer = st.SparseLinear.from_dense(w, None, "csr", keep)
    with pytest.raises(SparsecompError, match=r"float64, but the sparse weight is torch\.float32"):
        layer(torch.randn(2, 8, dtype=torch.float64))
    with pytest.raises(SparsecompError, match="got an input with 5 features"):
        layer(torch.randn(2, 5))
    with pytest.raises(SparsecompError, match="on meta"):
        st.ops.host_array(torch.empty(2, 2, device="meta"), "x")


@pytest.mark.parametrize("fullgraph", [False, True])
def test_bad_inputs_under_torch_compile_say_what_is_wrong(fullgraph: bool) -> None:
    """Dynamo traces our errors' construction: with ``fullgraph`` its report
    quotes our message; without, the model runs eagerly and raises it."""
    w, keep, _ = _masked(8, 8, 0.5, 5)
    layer = torch.compile(st.SparseLinear.from_dense(w, None, "csr", keep), fullgraph=fullgraph)
    cases = [
        (torch.randn(2, 5), "got an input with 5 features"),
        (torch.randn(2, 8, dtype=torch.float64), "float64, but the sparse weight is torch.float32"),
    ]
    for x, says in cases:
        with pytest.raises(Exception) as raised:  # noqa: PT011 (Dynamo's type or ours)
            layer(x)
        assert says in str(raised.value)
        assert fullgraph or isinstance(raised.value, SparsecompError)
        assert "super()" not in str(raised.value)


@settings(max_examples=25, deadline=None)
@given(
    rows=hs.integers(1, 24),
    cols=hs.integers(1, 24),
    batch=hs.integers(1, 9),
    sparsity=hs.floats(0.0, 1.0),
    layout=hs.sampled_from(["csr", "bsr:2x2", "hyb", "ell"]),
    seed=hs.integers(0, 2**16),
)
def test_forward_and_backward_match_dense_property(
    rows: int, cols: int, batch: int, sparsity: float, layout: str, seed: int
) -> None:
    w, keep, b = _masked(rows, cols, sparsity, seed, torch.float64)
    layer = st.SparseLinear.from_dense(w, b, layout, keep).double()
    x = torch.randn(batch, cols, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    ref_w = w.clone().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    ref = x_ref @ (ref_w * keep).T + b
    torch.testing.assert_close(y, ref)
    g = torch.randn_like(y)
    y.backward(g)
    ref.backward(g)
    torch.testing.assert_close(x.grad, x_ref.grad)
    rows_i, cols_i = np.nonzero(keep.numpy())
    torch.testing.assert_close(layer.values.grad, ref_w.grad[rows_i, cols_i])


def test_optimizer_steps_keep_the_pattern() -> None:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12))
    st.sparsify_(model, {"0": ("scalar_fraction:0.75", "bsr:2x2")})
    layer = model[0]
    before = layer.weight.detach() != 0
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 16)).square().mean().backward()
        opt.step()
    after = layer.weight.detach() != 0
    assert not (after & ~before).any()  # nothing outside the pattern ever grows


def test_resparsify_every_n_steps_shrinks_pattern_and_optimizer_state() -> None:
    from sparsecomp.torch.optim import ResparsifyEvery

    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(20, 10))
    st.sparsify_(model, {"0": ("scalar_fraction:0.5", "csr")})
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pruner = ResparsifyEvery(
        model, opt, every=2, schedule=lambda s: f"scalar_fraction:{0.5 + s / 10}"
    )
    x = torch.randn(6, 20)
    counts = []
    for _ in range(4):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        done = pruner.step()
        if done:
            counts.append(done["0"])
            layer = model[0]
            assert opt.state[layer.values]["exp_avg"].shape == layer.values.shape
            torch.testing.assert_close(model(x), x @ layer.weight.T + layer.bias)
    assert counts == [round(200 * 0.3), round(200 * 0.1)]


def test_moving_a_sparse_layer_to_a_device_without_kernels_is_refused() -> None:
    w, keep, _ = _masked(4, 4, 0.5, 6)
    layer = st.SparseLinear.from_dense(w, None, "csr", keep)
    with pytest.raises(SparsecompError, match="CPU or a CUDA GPU; it was moved to meta"):
        layer.to("meta")


def test_sparse_matrix_module_gradients_reach_b_and_values() -> None:
    import scipy.sparse as sp

    a = sp.random(30, 20, density=0.2, format="csr", random_state=5)  # float64
    module = st.SparseMatrix(a, "bsr:2x2", trainable=True)
    b = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(module, (b,))
    module(b).sum().backward()
    assert module.linear.values.grad is not None
    with pytest.raises(SparsecompError, match="needs a 2-D B with 20 rows"):
        module(torch.randn(3, 20, dtype=torch.float64))


def test_load_state_dict_keeps_the_parameter_an_optimizer_holds() -> None:
    w, keep, b = _masked(12, 10, 0.5, 7)
    source = st.SparseLinear.from_dense(w, b, "bsr:2x2", keep)
    target = st.SparseLinear.from_dense(w, b, "csr", torch.ones_like(keep))
    values = target.values
    opt = torch.optim.SGD(target.parameters(), lr=0.1)
    target.load_state_dict(source.state_dict())
    assert target.values is values
    assert target.values.shape == source.values.shape
    assert target.layout == "bsr:2x2"
    x = torch.randn(3, 10)
    torch.testing.assert_close(target(x), source(x))
    target(x).sum().backward()
    opt.step()  # updates the loaded values
    assert not torch.equal(target.values, source.values)


def test_layers_reading_one_input_share_its_transpose() -> None:
    """Three layers reading one input (attention's query, key, value) reuse its
    transpose: results and gradients equal dense torch, and an in-place change
    of the input between calls is seen (no stale transpose)."""
    from sparsecomp.torch import transpose

    torch.manual_seed(3)
    x = torch.randn(4, 100, 24, requires_grad=True)  # 400 rows: the blocked path
    dense = [torch.nn.Linear(24, 16) for _ in range(3)]
    # bsr:1x4: the transposed formulation (Y^T = W X^T), which takes transposes
    layers = [st.SparseLinear.from_dense(d.weight, d.bias, "bsr:1x4") for d in dense]
    outs = [layer(x) for layer in layers]
    assert transpose._last.source is not None
    assert transpose._last.source() is x
    want = [x @ layer.weight.T + layer.bias for layer in layers]
    for got, ref in zip(outs, want, strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    sum(o.sum() for o in outs).backward()
    grad = x.grad.clone()
    x.grad = None
    sum(r.sum() for r in want).backward()
    torch.testing.assert_close(grad, x.grad, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        y = x.detach().clone()
        first = layers[0](y)
        y.mul_(2)  # in place: a new version, so a new transpose
        second = layers[1](y)
        torch.testing.assert_close(first, y / 2 @ layers[0].weight.T + layers[0].bias)
        torch.testing.assert_close(second, y @ layers[1].weight.T + layers[1].bias)


@pytest.mark.parametrize("layout", ["bsr:4x1", "bsr:2x2", "csr", "nm:2:4"])
def test_row_major_layers_take_no_transpose(layout: str) -> None:
    """Layers whose blocks span rows, or stored row by row, read ``x`` and write
    ``y`` row-major (the ``linear`` kernels): no transpose is taken, the output
    is contiguous, and results and gradients equal dense torch."""
    from sparsecomp.torch import transpose

    torch.manual_seed(4)
    dense = torch.nn.Linear(24, 16)
    keep = st.mask_of(dense.weight, layout) if layout.startswith("nm") else None
    layer = st.SparseLinear.from_dense(dense.weight, dense.bias, layout, keep)
    transpose._last.source = None
    x = torch.randn(4, 100, 24, requires_grad=True)
    y = layer(x)
    assert transpose._last.source is None
    assert y.shape == (4, 100, 16)
    assert y.is_contiguous()
    want = x @ layer.weight.T + layer.bias
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-5)
    dy = torch.randn_like(y)
    (got,) = torch.autograd.grad(y, x, dy)
    (ref,) = torch.autograd.grad(want, x, dy)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    assert got.is_contiguous()


def test_a_shared_transpose_does_not_keep_a_graph_alive() -> None:
    """Under autograd the shared transpose is held weakly: dropping a pass's
    output frees its graph and the transpose with it."""
    import gc
    import weakref

    from sparsecomp.torch import transpose

    layer = st.SparseLinear.from_dense(torch.randn(16, 24), torch.randn(16), "bsr:1x4")
    x = torch.randn(400, 24, requires_grad=True)
    out = layer(x)
    assert transpose._last.result is not None
    kept = transpose._last.result()
    assert kept is not None
    assert kept.requires_grad
    seen = weakref.ref(kept)
    del out, kept
    gc.collect()
    assert seen() is None


@settings(max_examples=60, deadline=None)
@given(
    groups=hs.integers(1, 6),
    rows=hs.integers(1, 9),
    n=hs.integers(1, 9),
    shuffle=hs.booleans(),
    seed=hs.integers(0, 2**31),
)
def test_gather_kinds_match_take(groups: int, rows: int, n: int, shuffle: bool, seed: int) -> None:
    """A placement's gather, by whatever road it takes (a strided transpose of
    blocks, a take, a padded take), equals ``values[perm]`` with -1 reading 0."""
    from sparsecomp.torch import staged

    size = groups * rows * n
    perm = np.arange(size).reshape(groups, rows, n).transpose(0, 2, 1).reshape(-1).copy()
    rng = np.random.default_rng(seed)
    if shuffle:
        rng.shuffle(perm)
        perm[rng.random(size) < 0.1] = -1
    values = rng.standard_normal(size).astype(np.float32)
    kind = staged.gather_kind(perm)
    want = np.where(perm >= 0, values[np.maximum(perm, 0)], 0).astype(np.float32)
    got = np.full(size, np.nan, np.float32)
    staged.gather(values, perm, kind, got)
    np.testing.assert_array_equal(got, want)
    if not shuffle and rows >= 2 and n >= 2:
        assert kind == (groups, rows, n)


def test_grouped_nm_placement_gathers_by_blocks() -> None:
    """Grouped n:m in ``bsr:8x1`` (every row keeping as many entries) gathers its
    values by a strided transpose, not a take."""
    from sparsecomp.torch import staged

    w = torch.randn(64, 40)
    layer = st.SparseLinear.from_dense(w, None, "bsr:8x1", st.mask_of(w, "nm:1:4:8"))
    perm = layer._placed[1]
    assert staged.gather_kind(perm.numpy()) == (8, 8, 10)
    x = torch.randn(5, 40)
    torch.testing.assert_close(layer(x), x @ layer.weight.t(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "first_use",
    ["auto call", "weight", "to_dense_linear", "load another pattern"],
)
def test_state_built_under_inference_mode_serves_autograd_later(first_use: str) -> None:
    """A layer's first use under ``torch.inference_mode`` (an ``"auto"`` layer's choice,
    ``.weight``, ``to_dense_linear``, loading another pattern) keeps no inference tensor:
    a later call recording gradients works, as a dense ``nn.Linear``'s does (it failed,
    "Inference tensors cannot be saved for backward")."""
    torch.manual_seed(0)
    x = torch.randn(7, 64)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96))
    st.sparsify_(
        model, {"*": ("scalar_fraction:0.7", "auto" if first_use == "auto call" else "csr")}
    )
    other = torch.nn.Sequential(torch.nn.Linear(64, 96))
    st.sparsify_(other, {"*": ("scalar_fraction:0.5", "csr")})
    with torch.inference_mode():
        if first_use == "auto call":
            model(x)
        elif first_use == "weight":
            _ = model[0].weight
        elif first_use == "to_dense_linear":
            model[0].to_dense_linear()
        else:
            model.load_state_dict(other.state_dict())
    model(x).sum().backward()
    model[0].weight.sum().backward()
    dense = model[0].to_dense_linear()
    torch.testing.assert_close(model(x), dense(x), rtol=1e-4, atol=1e-5)
    assert model[0].values.grad is not None


def test_hooks_of_a_replaced_layer_go_with_it() -> None:
    """``sparsify_`` and ``densify_`` give the new layer the replaced one's hooks, whose
    handles still remove them (they were dropped: the output changed silently), and
    ``fuse_activations_`` leaves a pair with hooks unfused, saying why."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 32))
    handle = model[0].register_forward_hook(lambda mod, inp, out: out * 2)
    model[2].register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    x = torch.randn(4, 64)
    with torch.no_grad():
        before = model(x)
        st.sparsify_(model, {"*": ("threshold:0", "csr")})  # every entry kept
        torch.testing.assert_close(model(x), before, rtol=1e-4, atol=1e-5)
        st.densify_(model)
        torch.testing.assert_close(model(x), before, rtol=1e-4, atol=1e-5)
        handle.remove()
        assert not model[0]._forward_hooks
    st.sparsify_(model, {"0": ("scalar_fraction:0.5", "csr")})
    model[1].register_forward_hook(lambda mod, inp, out: None)  # on the ReLU
    with pytest.raises(SparsecompError, match=r"have forward hooks, or their activations do \(0\)"):
        st.fuse_activations_(model)


def _adam_on_a_sparse_layer() -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
    """A one-layer sparse model, its Adam, and a training step (taken once)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32))
    st.sparsify_(model, {"0": ("scalar_fraction:0.5", "csr")})
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(4, 16)

    def step() -> None:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    step()
    return model, opt, step


@pytest.mark.parametrize("other", ["fewer", "moved"])
def test_loading_another_pattern_drops_the_optimizers_state_of_the_old(other: str) -> None:
    """Restore a checkpoint, then keep training: the optimizer's moments were of the
    pattern before the load (another length: the next step failed inside torch; the
    same length: other entries' moments). They are dropped, with a warning."""
    model, opt, step = _adam_on_a_sparse_layer()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    if other == "fewer":
        st.resparsify_(model, "scalar_fraction:0.9", opt)  # keeps the state, cut to 51
    else:  # the same number of entries, in other columns
        saved["0.indices"] = (saved["0.indices"] + 1) % 16
    step()
    model.load_state_dict(saved)
    values = model[0].values
    with pytest.warns(UserWarning, match="state of a SparseLinear's values was dropped"):
        step()
    assert opt.state[values]["exp_avg"].shape == values.shape
    assert int(opt.state[values]["step"]) == 1  # afresh
    step()  # and no warning for an unchanged pattern
    assert int(opt.state[values]["step"]) == 2


def test_an_optimizer_restored_with_the_model_keeps_its_state() -> None:
    """A checkpoint of both: the optimizer's loaded state is of the loaded pattern."""
    model, opt, step = _adam_on_a_sparse_layer()
    saved = copy.deepcopy((model.state_dict(), opt.state_dict()))
    st.resparsify_(model, "scalar_fraction:0.9", opt)
    step()
    model.load_state_dict(saved[0])
    opt.load_state_dict(saved[1])
    step()  # no warning (warnings are errors here)
    assert int(opt.state[model[0].values]["step"]) == 2


def test_assigning_a_weight_says_what_to_do() -> None:
    """It was torch's KeyError "attribute 'weight' already exists"."""
    w, keep, b = _masked(8, 6, 0.5, 3)
    layer = st.SparseLinear.from_dense(w, b, "csr", keep)
    with pytest.raises(SparsecompError, match="weight is its pattern and values") as info:
        layer.weight = torch.nn.Parameter(torch.randn(8, 6))
    assert "from_dense" in str(info.value)


# -- a battery of user-style models (session 47) ---------------------------------------


class _TiedBias(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
        self.b.bias = self.a.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def test_a_bias_shared_by_two_layers_stays_shared() -> None:
    """Each SparseLinear held a copy of the bias: the tie was gone, silently, and the
    bias's gradient was no longer the sum of both uses."""
    torch.manual_seed(0)
    m = _TiedBias()
    st.sparsify_(m, {"*": ("scalar_fraction:0.5", "csr")})
    assert m.a.bias is m.b.bias
    d = _TiedBias()
    with torch.no_grad():
        d.a.weight.copy_(m.a.weight)
        d.b.weight.copy_(m.b.weight)
        d.a.bias.copy_(m.a.bias)
    x = torch.randn(8, 16)
    m(x).sum().backward()
    d(x).sum().backward()
    torch.testing.assert_close(m.a.bias.grad, d.a.bias.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("constraint", ["weight_norm", "spectral_norm", "old_weight_norm"])
def test_a_constrained_weight_is_left_dense_with_a_warning(constraint: str) -> None:
    """The parametrization was dropped silently (the model trained without it); the
    old hook form moved onto the sparse layer and failed at the call."""
    from torch.nn.utils import parametrizations

    linear = torch.nn.Linear(16, 8)
    wrap = {
        "weight_norm": parametrizations.weight_norm,
        "spectral_norm": parametrizations.spectral_norm,
        "old_weight_norm": torch.nn.utils.weight_norm,
    }[constraint]
    if constraint == "old_weight_norm":
        with pytest.warns(FutureWarning):  # torch deprecates it
            linear = wrap(linear)
    else:
        linear = wrap(linear)
    m = torch.nn.Sequential(linear, torch.nn.ReLU(), torch.nn.Linear(8, 4))
    with pytest.warns(UserWarning, match="left 1 selected nn.Linear dense: 0 .*constraint"):
        done = st.sparsify_(m, {"*": ("scalar_fraction:0.5", "csr")})
    assert list(done) == ["2"]
    assert not isinstance(m[0], st.SparseLinear)
    m(torch.randn(3, 16))  # runs, with its constraint


def test_sparsify_rules_name_the_rule_that_took_a_layer_and_see_every_name() -> None:
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    with pytest.raises(SparsecompError, match=r"rule '0' selects only layers an earlier rule "
                       r"took \('\*'\): the first matching rule wins"):  # fmt: skip
        st.sparsify_(m, {"*": "scalar_fraction:0.5", "0": ("nm:1:2", "nm:1:2")})
    fc = torch.nn.Linear(8, 8)
    shared = torch.nn.ModuleDict({"a": fc, "b": fc})
    done = st.sparsify_(shared, {"b": ("scalar_fraction:0.5", "csr")})  # its second name
    assert shared["a"] is shared["b"]
    assert isinstance(shared["b"], st.SparseLinear)
    assert len(done) == 1


def test_a_lazy_layer_not_called_yet_is_explained() -> None:
    m = torch.nn.Sequential(torch.nn.LazyLinear(8), torch.nn.ReLU())
    with pytest.raises(SparsecompError, match=r"lazy layers .* not called yet"):
        st.sparsify_(m, {"*": ("scalar_fraction:0.5", "csr")})
    m(torch.randn(2, 12))
    st.sparsify_(m, {"*": ("scalar_fraction:0.5", "csr")})
    assert isinstance(m[0], st.SparseLinear)
    assert m[0].in_features == 12


def test_fusing_a_layer_called_in_a_loop_says_so() -> None:
    class Loop(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.act = torch.nn.Linear(8, 8), torch.nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(3):
                x = self.act(self.fc(x))
            return x

    m = Loop()
    st.sparsify_(m, {"*": ("scalar_fraction:0.5", "csr")})
    with pytest.raises(SparsecompError, match=r"fc \(3 calls in forward\)"):
        st.fuse_activations_(m)


def test_lbfgs_keeps_its_history_on_a_sparse_first_parameter() -> None:
    """LBFGS keeps flat state of every parameter under the first; with a SparseLinear's
    values first, the stale-state check dropped it at every step (it restarted as
    gradient descent, silently apart from a warning about a load that never was)."""
    import warnings

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    st.sparsify_(model, {"0": ("scalar_fraction:0.5", "csr")})
    dense = torch.nn.Sequential(model[0].to_dense_linear(), torch.nn.Tanh(),
                                copy.deepcopy(model[2]))  # fmt: skip
    mask = model[0].to_dense_linear().weight.detach() != 0
    dense[0].weight.register_hook(lambda g: g * mask)
    x, y = torch.randn(32, 12), torch.randint(0, 3, (32,))
    losses = []
    for m in (model, dense):
        opt = torch.optim.LBFGS(m.parameters(), lr=1, max_iter=5, history_size=5)

        def closure(m=m, opt=opt) -> torch.Tensor:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            return loss

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "state was dropped"
            losses.append([float(opt.step(closure).detach()) for _ in range(4)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
