"""sparsecomp.torch under torch.func: the custom ops' vmap rules (``sparsecomp.torch.batching``)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

import sparsecomp.torch as st
from sparsecomp.errors import SparsecompError

# row-major kernels (csr, bsr:4x1, nm:1:2) and transposed ones (bsr:1x4, hyb)
LAYOUTS = ["csr", "bsr:4x1", "nm:1:2", "bsr:1x4", "hyb"]


def _model(layout: str, seed: int = 0) -> tuple[nn.Module, nn.Module]:
    """A sparsified MLP and the dense MLP with the same masked weights."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 24), nn.GELU(), nn.Linear(24, 6))
    sparsifier = "nm:1:2" if layout.startswith("nm") else "scalar_fraction:0.7"
    st.sparsify_(model, {nn.Linear: (sparsifier, layout)})
    dense = nn.Sequential(model[0].to_dense_linear(), nn.GELU(), model[2].to_dense_linear())
    return model, dense


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("grad_mode", [False, True])
def test_vmap_over_inputs_equals_dense(layout: str, grad_mode: bool) -> None:
    model, dense = _model(layout)
    x = torch.randn(5, 3, 32)  # vmap over 5; each call sees 3 x 32
    with torch.set_grad_enabled(grad_mode):
        got = vmap(model)(x)
    torch.testing.assert_close(got, vmap(dense)(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["csr", "bsr:1x4"])
def test_autograd_through_vmap_reaches_the_stored_entries(layout: str) -> None:
    model, dense = _model(layout)
    x = torch.randn(4, 2, 32, requires_grad=True)
    vmap(model)(x).square().sum().backward()
    xd = x.detach().clone().requires_grad_(True)
    vmap(dense)(xd).square().sum().backward()
    torch.testing.assert_close(x.grad, xd.grad, rtol=1e-4, atol=1e-5)
    stored = model[0].weight.detach() != 0  # CSR order: row-major, as the mask indexes
    assert int(stored.sum()) == model[0].values.numel()
    want = dense[0].weight.grad[stored]
    torch.testing.assert_close(model[0].values.grad, want, rtol=1e-4, atol=1e-5)


def test_an_ensemble_of_sparse_models_runs_under_vmap() -> None:
    """Stacked parameters (torch.func's model ensembling): each member's own values."""
    base, _ = _model("csr")
    members = [copy.deepcopy(base) for _ in range(3)]
    with torch.no_grad():
        for i, member in enumerate(members):
            for p in member.parameters():
                p.mul_(1.0 + 0.25 * i)
    params, buffers = stack_module_state(members)
    x = torch.randn(7, 32)

    def run(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (x,))

    with torch.no_grad():
        got = vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    want = torch.stack([member(x) for member in members])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_func_grad_is_refused_with_a_clear_error() -> None:
    model, _ = _model("csr")
    x = torch.randn(3, 32)
    params = dict(model.named_parameters())
    with pytest.raises(SparsecompError, match=r"(?s)gradient transforms .* torch\.autograd"):
        grad(lambda p: functional_call(model, p, (x,)).sum())(params)


@pytest.mark.parametrize("layout", ["csr", "bsr:4x1", "hyb"])
def test_functional_call_runs_the_pattern_it_is_given(layout: str) -> None:
    """functional_call(a, b's state) ran b's values on a's pattern (placed once, from
    a's buffers), silently; a runs its own pattern again afterwards."""
    a, _ = _model(layout, seed=0)
    b, dense_b = _model(layout, seed=1)
    x = torch.randn(4, 32)
    state = {**dict(b.named_parameters()), **dict(b.named_buffers())}
    for _ in range(2):  # the borrowed placement, then its memo
        torch.testing.assert_close(functional_call(a, state, (x,)), dense_b(x), rtol=1e-4,
                                   atol=1e-5)  # fmt: skip
    dense_a = nn.Sequential(a[0].to_dense_linear(), nn.GELU(), a[2].to_dense_linear())
    torch.testing.assert_close(a(x), dense_a(x), rtol=1e-4, atol=1e-5)


def test_an_ensemble_of_other_patterns_is_refused_and_of_one_pattern_runs() -> None:
    """stack_module_state of layers sparsified apart: every member but the first ran
    the first's pattern. Members sharing the pattern (copies) still run."""
    a, _ = _model("csr", seed=0)
    b, _ = _model("csr", seed=1)
    x = torch.randn(4, 32)

    def ensemble(models: list[nn.Module]) -> torch.Tensor:
        params, buffers = stack_module_state(models)
        call = lambda p, q, x: functional_call(a, (p, q), (x,))  # noqa: E731
        return vmap(call, in_dims=(0, 0, None))(params, buffers, x)

    with pytest.raises(SparsecompError, match="another sparsity pattern in some members"):
        ensemble([a, b])
    twin = copy.deepcopy(a)
    with torch.no_grad():
        twin[0].values.mul_(2.0)
    got = ensemble([a, twin])
    torch.testing.assert_close(got[0], a(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[1], twin(x), rtol=1e-4, atol=1e-5)


def test_a_pattern_written_in_place_is_placed_again() -> None:
    """indices.copy_(...) under no_grad changed .weight and not the forward pass."""
    a, _ = _model("csr", seed=0)
    b, dense_b = _model("csr", seed=1)
    x = torch.randn(4, 32)
    a(x)  # placed, and used once
    with torch.no_grad():
        for mine, theirs in zip(a.modules(), b.modules(), strict=True):
            if isinstance(mine, st.SparseLinear):
                mine.indptr.copy_(theirs.indptr)
                mine.indices.copy_(theirs.indices)
                mine.values.copy_(theirs.values)
                mine.bias.copy_(theirs.bias)
    torch.testing.assert_close(a(x), dense_b(x), rtol=1e-4, atol=1e-5)
