"""A sparsified activation fused into the op that produces it, feeding the next linear layer.

STen sparsifies the output of a transformer's FFN activation (GELU) with a
streaming sparsifier and lets the next linear layer consume the sparse
activation. :class:`SparseActivationLinear` does that with two compiled
kernels and no dense activation in between:

1. ``gelu_sparsify``: ``GELU(x)`` (the exact, erf form) with the elements of
   magnitude below ``threshold`` dropped *in the loop that computes them*
   (``sparse_iter.sparsify`` with a ``threshold`` sparsifier, fused into its
   producer): the activation is born as a CSR matrix;
2. ``spmm``: that CSR activation times the layer's weight, transposed
   (kept as a contiguous copy, refreshed when the weight changes): the
   result comes out row-major, as torch lays out a linear layer's output.

``sparsecomp::sparse_act_linear`` is the custom op (fake implementation
included, so ``torch.compile(fullgraph=True)`` traces it). Its backward
pass is exact and runs in torch: it recomputes ``GELU(x)`` and the kept
mask, then ``dW = dY^T A``, ``dx = (dY W) * mask * GELU'(x)``, ``db = sum dY``.
An element whose magnitude lies within rounding of the threshold may be kept
by one side and not the other (the kernel's ``erf`` and torch's differ in the
last bits).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from sparsecomp.errors import SparsecompError
from sparsecomp.torch import kernels, structure
from sparsecomp.torch.fuse import activation_of
from sparsecomp.torch.nn import SparseLinear
from sparsecomp.torch.ops import host_array
from sparsecomp.torch.tracing import refuse_jit, refuse_script, traced


@torch.library.custom_op("sparsecomp::sparse_act_linear", mutates_args=())
def sparse_act_linear(x: Tensor, weight_t: Tensor, bias: Tensor, threshold: float) -> Tensor:
    """``sparsify(GELU(x)) @ weight_t + bias``, ``x`` ``(n, f)``, ``weight_t`` ``(f, o)``."""
    if x.dim() != 2 or weight_t.dim() != 2 or x.shape[1] != weight_t.shape[0]:
        raise SparsecompError(
            f"sparse_act_linear: x {tuple(x.shape)} and weight^T {tuple(weight_t.shape)} "
            "do not chain"
        )
    xs = host_array(x, "the activation's input")
    ws = host_array(weight_t, "the weight", x.dtype)
    act = kernels.program("gelu_sparsify", x.dtype, threshold).functions["gelu_sparsify"](xs)
    out = torch.empty((x.shape[0], weight_t.shape[1]), dtype=x.dtype)
    kernels.kernel("spmm", x.dtype, "csr")(act, ws, out=out.numpy())
    if bias.numel():
        out += bias
    return out


@sparse_act_linear.register_fake
def _fake(x: Tensor, weight_t: Tensor, bias: Tensor, threshold: float) -> Tensor:
    torch._check(x.dim() == 2 and weight_t.dim() == 2 and x.shape[1] == weight_t.shape[0])
    return x.new_empty((x.shape[0], weight_t.shape[1]))


def _gelu_grad(x: Tensor) -> Tensor:
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    x, weight_t, bias, threshold = inputs
    ctx.save_for_backward(x, weight_t)
    ctx.threshold, ctx.has_bias = threshold, bias.numel() > 0


def _backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
    x, weight_t = ctx.saved_tensors
    g = torch.nn.functional.gelu(x)
    mask = g.abs() >= ctx.threshold
    act = g * mask
    d_x = d_w = d_b = None
    if ctx.needs_input_grad[0]:
        d_x = (grad @ weight_t.t()) * mask * _gelu_grad(x)
    if ctx.needs_input_grad[1]:
        d_w = act.t() @ grad
    if ctx.needs_input_grad[2] and ctx.has_bias:
        d_b = grad.sum(0)
    return d_x, d_w, d_b, None


sparse_act_linear.register_autograd(_backward, setup_context=_setup)


class SparseActivationLinear(nn.Module):
    """``linear(sparsify(GELU(x)))``: a GELU whose output is sparsified as it is computed.

    Wraps an ``nn.Linear`` (its weight and bias are this module's); elements of
    the activation with ``|GELU(x)| < threshold`` are dropped. Drop it in where
    a model computes ``linear(gelu(x))``, e.g. a BERT FFN's output layer after
    setting the intermediate activation to ``nn.Identity``
    (:func:`sparsecomp.torch.sparsify_activations_`).
    """

    def __init__(self, linear: nn.Linear, threshold: float) -> None:
        super().__init__()
        if threshold < 0:
            raise SparsecompError(f"the activation threshold must be >= 0, got {threshold}")
        self.weight = linear.weight
        self.bias = linear.bias
        self.threshold = float(threshold)
        self._wt: tuple[int, int, Tensor] | None = None

    def _weight_t(self) -> Tensor:
        """``weight^T`` contiguous: recomputed when the weight changes (and always when
        gradients flow, so that autograd sees it). The kept one is compared with the
        weight at each call, not trusted to its version counter: an update through
        ``.data`` (``p.data -= lr * p.grad``) leaves none (the compare took 1.5 ms
        for a 768 x 3072 weight here, the transpose 3.0)."""
        w = self.weight
        if (torch.is_grad_enabled() and w.requires_grad) or traced(w):
            return w.t().contiguous()
        mark = (w.data_ptr(), structure.version(w))
        kept = self._wt
        if kept is None or kept[:2] != mark or not torch.equal(kept[2], w.detach().t()):
            kept = self._wt = (*mark, w.detach().t().contiguous())
        return kept[2]

    __prepare_scriptable__ = refuse_script

    def forward(self, x: Tensor) -> Tensor:
        refuse_jit()
        lead = x.shape[:-1]
        bias = self.bias if self.bias is not None else x.new_zeros(0)
        flat = x.reshape(-1, x.shape[-1]).contiguous()
        y = sparse_act_linear(flat, self._weight_t(), bias, self.threshold)
        return y.reshape(*lead, y.shape[-1])

    def extra_repr(self) -> str:
        o, i = self.weight.shape
        return f"gelu -> threshold {self.threshold} -> linear({i} -> {o})"


def sparsify_activations_(model: nn.Module, threshold: float) -> list[str]:
    """Sparsify the GELU output of every HuggingFace BERT-style FFN in ``model``, in place.

    A module with ``intermediate.intermediate_act_fn`` (GELU) and
    ``output.dense`` (a linear layer) gets an identity activation and a
    :class:`SparseActivationLinear` output layer. Returns the names changed;
    none found is an error.
    """
    done, other = [], []
    for name, module in list(model.named_modules()):
        inter = getattr(module, "intermediate", None)
        out = getattr(module, "output", None)
        dense = getattr(out, "dense", None)
        if inter is None or not isinstance(dense, nn.Linear | SparseLinear):
            continue
        act = getattr(inter, "intermediate_act_fn", None)
        if act is None:
            continue
        # recognized by what it computes (the kernel's GELU is the exact, erf form):
        # "gelu_new", QuickGELU and the tanh form were replaced by it, silently
        if activation_of(act) != "gelu":
            other.append(f"{name or 'the model'}: {type(act).__name__}")
            continue
        if isinstance(dense, SparseLinear):
            other.append(f"{name or 'the model'}: output.dense is sparse already")
            continue
        inter.intermediate_act_fn = nn.Identity()
        setattr(out, "dense", SparseActivationLinear(dense, threshold))
        done.append(name)
    if not done:
        why = f" (left: {'; '.join(other)})" if other else ""
        raise SparsecompError(
            "sparsify_activations_: no BERT-style FFN (intermediate with the exact "
            f"GELU, output.dense an nn.Linear) in this model{why}",
            hint="the activation must compute the erf GELU; call it before sparsify_, "
            "which replaces output.dense",
        )
    return done
