"""The ``sparsecomp::`` custom ops: compiled sparse kernels as PyTorch operators.

Each op is a :func:`torch.library.custom_op` with a fake (meta)
implementation, so ``torch.compile(fullgraph=True)`` traces through it and
``torch.library.opcheck`` checks it:

* ``sparsecomp::layout_mm(values, b, perm, index, layout, shape, bias=None)``:
  ``A @ b`` for ``A`` stored in ``layout`` (a :class:`~.structure.Placement`:
  ``perm`` gathers ``values``, kept in CSR order, into storage order;
  ``index`` holds the packed index buffers), plus ``bias[:, None]`` if given
  (a linear layer's bias: the kernel's accumulators start from it, see
  :mod:`.kernels`). Not differentiable by itself.
* ``sparsecomp::linear(values, x, perm, index, layout, shape, bias=None,
  activation="")``: ``activation(x @ A.T (+ bias))`` with ``x`` and the
  result row-major (a linear layer as torch holds it), for layouts with
  multi-row blocks or stored row by row (:func:`.kernels.row_major`); the
  activation (``"gelu"``, ``"relu"``) is applied by the kernel as it stores
  the result. Not differentiable by itself (a layer with an activation
  runs it when no gradient is wanted, see :class:`~.nn.SparseLinear`).
* ``sparsecomp::sddmm(pattern, x, y, shape)``: ``(x @ y.T)`` at the entries of
  a CSR pattern, in CSR order: the gradient of a sparse weight.
* ``sparsecomp::sparse_mm(values, b, pattern, fwd_perm, fwd_index, bwd_perm,
  bwd_index, layout, layout_t, shape, bias=None)``: ``A @ b (+ bias[:, None])``
  with autograd. Its backward computes ``d values = sddmm(pattern, dC, b)``
  (only at stored entries: the weight stays sparse), ``d b = A^T @ dC`` with
  ``layout_mm`` on the transposed placement (a compiled SpMM, never a dense
  copy of ``A``) and ``d bias = dC.sum(1)``.
* ``sparsecomp::sparse_linear(values, x, pattern, fwd_perm, fwd_index,
  bwd_perm, bwd_index, layout, layout_t, shape, bias=None)``: ``linear`` with
  autograd, the gradients as ``sparse_mm``'s (``dY`` and ``x`` transposed for
  them).

Dense operands are used in place (``Tensor.numpy()`` shares memory) and
results are written straight into new torch tensors (``linear``'s is the
kernel's own result, in 2 MiB pages, wrapped without a copy). A tensor on another
device, or of a dtype with no kernel, is a :class:`SparsecompError`, never a
silent fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.names import parse_layout
from sparsecomp.torch import kernels, staged, structure
from sparsecomp.torch.transpose import contiguous_t, transposed

CSR = parse_layout("csr").attr_text()


def host_array(t: Tensor, what: str, dtype: torch.dtype | None = None) -> np.ndarray:
    """``t``'s memory as a numpy array (no copy) after checking device, dtype and layout."""
    if t.device.type != "cpu":
        raise SparsecompError(
            f"{what} is on {t.device}, but this kernel runs on the CPU",
            hint="move it with .cpu(), or compile the kernel for a cuda: target",
        )
    if t.layout != torch.strided:
        raise SparsecompError(f"{what} must be a dense (strided) tensor, not {t.layout}")
    if dtype is not None and t.dtype != dtype:
        raise SparsecompError(
            f"{what} is {t.dtype}, but the sparse weight is {dtype}",
            hint="convert one of them with .to(dtype)",
        )
    if t.is_floating_point():
        kernels.element(t.dtype)  # a clear error for a dtype with no kernel
    return t.detach().resolve_neg().resolve_conj().contiguous().numpy()


def _check_matrix(b: Tensor, what: str, rows: int) -> None:
    if b.dim() != 2 or b.shape[0] != rows:
        raise SparsecompError(
            f"{what} must be a matrix with {rows} rows, got shape {tuple(b.shape)}"
        )


def _check_bias(bias: Tensor | None, rows: int) -> None:
    if bias is not None and tuple(bias.shape) != (rows,):
        raise SparsecompError(f"the bias must have shape ({rows},), got {tuple(bias.shape)}")


def run_layout_mm(
    values: Tensor,
    b: Tensor,
    perm: Tensor,
    index: list[Tensor],
    layout: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    """``A @ b (+ bias[:, None])``, ``A`` (``shape``) in ``layout``. The op
    ``sparsecomp::layout_mm`` (:data:`layout_mm`) wraps it; eager callers call it
    directly (no dispatch). A weight on a GPU runs there (:mod:`.device`)."""
    _check_matrix(b, "the dense operand", shape[1])
    _check_bias(bias, shape[0])
    if values.device.type == "cuda":
        from sparsecomp.torch import device

        return device.run_layout_mm(values, b, perm, index, layout, shape, bias)
    vals = host_array(values, "the sparse weight's values")
    dense = host_array(b, "the dense operand", values.dtype)
    added = None if bias is None else host_array(bias, "the bias", values.dtype)
    out = torch.empty((shape[0], b.shape[1]), dtype=values.dtype)
    with staged.operand(vals, perm, index, layout, shape) as stored:
        if added is None:
            kernels.kernel("spmm", values.dtype, layout)(stored, dense, out=out.numpy())
        else:
            kernels.kernel("spmm_bias", values.dtype, layout)(stored, dense, added, out=out.numpy())
    return out


#: ``A @ b (+ bias[:, None])`` as a custom op; see the module
layout_mm = torch.library.custom_op("sparsecomp::layout_mm", mutates_args=())(run_layout_mm)


@layout_mm.register_fake
def _layout_mm_fake(
    values: Tensor,
    b: Tensor,
    perm: Tensor,
    index: list[Tensor],
    layout: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    torch._check(b.dim() == 2 and b.shape[0] == shape[1])
    torch._check(bias is None or (bias.dim() == 1 and bias.shape[0] == shape[0]))
    return b.new_empty((shape[0], b.shape[1]), dtype=values.dtype)


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
    """``activation(x @ A.T (+ bias))``, ``x`` row-major ``n x shape[1]``, ``A``
    (``shape``) in ``layout`` (one :func:`.kernels.row_major` accepts); the
    result is row-major ``n x shape[0]``. ``activation``: ``""`` (none) or one of
    :data:`.kernels.ACTIVATIONS`, applied by the kernel as it stores each
    result. Not differentiable by itself. The op ``sparsecomp::linear``
    (:data:`linear`) wraps it; eager callers call it directly (no dispatch). A
    weight on a GPU runs there (:mod:`.device`)."""
    if x.dim() != 2 or x.shape[1] != shape[1]:
        raise SparsecompError(
            f"the input must be a matrix with {shape[1]} columns, got shape {tuple(x.shape)}"
        )
    _check_bias(bias, shape[0])
    if values.device.type == "cuda":
        from sparsecomp.torch import device

        return device.run_linear(values, x, perm, index, layout, shape, bias, activation)
    name = kernels.linear_name(bias is not None, activation)
    vals = host_array(values, "the sparse weight's values")
    dense = host_array(x, "the input", values.dtype)
    added = None if bias is None else host_array(bias, "the bias", values.dtype)
    fn = kernels.kernel(name, values.dtype, layout)
    with staged.operand(vals, perm, index, layout, shape) as stored:
        result = fn(stored, dense) if added is None else fn(stored, dense, added)
    # the kernel's own result (2 MiB pages: its stores walk down the rows of Y)
    return torch.from_numpy(np.require(result, requirements=["W", "C"]))


#: ``activation(x @ A.T (+ bias))`` as a custom op; see :func:`run_linear`
linear = torch.library.custom_op("sparsecomp::linear", mutates_args=())(run_linear)


@linear.register_fake
def _linear_fake(
    values: Tensor,
    x: Tensor,
    perm: Tensor,
    index: list[Tensor],
    layout: str,
    shape: list[int],
    bias: Tensor | None = None,
    activation: str = "",
) -> Tensor:
    torch._check(x.dim() == 2 and x.shape[1] == shape[1])
    torch._check(bias is None or (bias.dim() == 1 and bias.shape[0] == shape[0]))
    return x.new_empty((x.shape[0], shape[0]), dtype=values.dtype)


@torch.library.custom_op("sparsecomp::sddmm", mutates_args=())
def sddmm(pattern: list[Tensor], x: Tensor, y: Tensor, shape: list[int]) -> Tensor:
    """``(x @ y.T)`` at a CSR pattern's entries (``pattern``: counts, indptr, indices)."""
    _check_matrix(x, "sddmm's x", shape[0])
    _check_matrix(y, "sddmm's y", shape[1])
    if x.shape[1] != y.shape[1]:
        raise SparsecompError(f"sddmm: x has {x.shape[1]} columns and y {y.shape[1]}")
    xs, ys = host_array(x, "sddmm's x"), host_array(y, "sddmm's y", x.dtype)
    packed = structure.tensor_of(CSR, tuple(shape), tuple(pattern))
    ones = packed.with_values(np.ones(packed.nse, xs.dtype), copy=False)
    result = kernels.kernel("sddmm", x.dtype, CSR)(ones, xs, ys)
    return torch.from_numpy(np.require(result.values, requirements=["W", "C"]))


@sddmm.register_fake
def _sddmm_fake(pattern: list[Tensor], x: Tensor, y: Tensor, shape: list[int]) -> Tensor:
    nnz = pattern[2].shape[0]
    return x.new_empty((nnz,))


def _no_second_order(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
    raise SparsecompError(
        "sparsecomp::layout_mm and sparsecomp::sddmm have no gradient: they are a sparse "
        "layer's backward pass, so a gradient through them is a second-order gradient "
        "of that layer (create_graph=True), which is not supported",
        hint="differentiate once (create_graph=False), or densify_ the model for "
        "gradient penalties and Hessian products; a sparse product to train through is "
        "sparsecomp.torch.SparseLinear or SparseMatrix, not these ops",
    )


def _keep_nothing(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    return None


# The backward ops of sparse_mm and sparse_linear: a graph built through them
# (create_graph=True) ends there with a clear error, not torch's "no autograd
# formula was registered".
layout_mm.register_autograd(_no_second_order, setup_context=_keep_nothing)
sddmm.register_autograd(_no_second_order, setup_context=_keep_nothing)


@torch.library.custom_op("sparsecomp::sparse_mm", mutates_args=())
def sparse_mm(
    values: Tensor,
    b: Tensor,
    pattern: list[Tensor],
    fwd_perm: Tensor,
    fwd_index: list[Tensor],
    bwd_perm: Tensor,
    bwd_index: list[Tensor],
    layout: str,
    layout_t: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    """``A @ b (+ bias[:, None])`` with autograd for ``values``, ``b`` and ``bias``;
    see the module."""
    return run_layout_mm(values, b, fwd_perm, fwd_index, layout, shape, bias)


@sparse_mm.register_fake
def _sparse_mm_fake(
    values: Tensor,
    b: Tensor,
    pattern: list[Tensor],
    fwd_perm: Tensor,
    fwd_index: list[Tensor],
    bwd_perm: Tensor,
    bwd_index: list[Tensor],
    layout: str,
    layout_t: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    return _layout_mm_fake(values, b, fwd_perm, fwd_index, layout, shape, bias)


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    values, b, pattern, _, _, bwd_perm, bwd_index, _, layout_t, shape, *_ = inputs
    ctx.save_for_backward(values, b, bwd_perm, *pattern, *bwd_index)
    ctx.split, ctx.fwd_count = len(pattern), len(inputs[4])
    ctx.layout_t, ctx.shape = layout_t, shape


def _not_batched(grad: Tensor) -> None:
    """Refuse the gradients ``torch.autograd.grad(..., is_grads_batched=True)`` passes
    (and so ``jacobian``/``hessian(vectorize=True)``): they are batched by torch's
    older vmap, which takes no custom op's rule ("Batching rule not implemented for
    sparsecomp::sddmm")."""
    if torch._C._functorch.is_legacy_batchedtensor(grad):
        raise SparsecompError(
            "batched gradients (torch.autograd.grad(..., is_grads_batched=True), "
            "jacobian or hessian with vectorize=True) do not go through a sparse layer: "
            "torch batches them with its older vmap, which runs no custom op",
            hint="use vectorize=False, or torch.func.vmap over a function calling "
            "torch.autograd.grad",
        )


def _backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
    _not_batched(grad)
    values, b, bwd_perm, *rest = ctx.saved_tensors
    pattern, bwd_index = rest[: ctx.split], rest[ctx.split :]
    grad = contiguous_t(grad)  # dY^T: a view of dY (row-major) transposed
    d_values = d_b = None
    if ctx.needs_input_grad[0]:
        d_values = sddmm(list(pattern), grad, b.contiguous(), list(ctx.shape))
    if ctx.needs_input_grad[1]:
        shape_t = [ctx.shape[1], ctx.shape[0]]
        d_b = layout_mm(values, grad, bwd_perm, list(bwd_index), ctx.layout_t, shape_t)
    d_bias = grad.sum(1) if _wants_bias(ctx) else None
    return _gradients(ctx, d_values, d_b, d_bias, pattern, bwd_index)


def _wants_bias(ctx: Any) -> bool:
    """Whether the bias, the 11th input where it was passed (a call may leave the
    default out), needs a gradient."""
    return len(ctx.needs_input_grad) > 10 and ctx.needs_input_grad[10]


def _gradients(
    ctx: Any,
    d_values: Tensor | None,
    d_dense: Tensor | None,
    d_bias: Tensor | None,
    pattern: list[Tensor],
    bwd_index: list[Tensor],
) -> tuple[Any, ...]:
    """The gradients of ``sparse_mm``'s or ``sparse_linear``'s inputs, in order (list
    inputs get a list of ``None`` back; the bias only where it was passed)."""
    return (
        d_values,
        d_dense,
        [None] * len(pattern),
        None,
        [None] * ctx.fwd_count,
        None,
        [None] * len(bwd_index),
        None,
        None,
        None,
        *([d_bias] if len(ctx.needs_input_grad) > 10 else []),
    )


sparse_mm.register_autograd(_backward, setup_context=_setup)


@torch.library.custom_op("sparsecomp::sparse_linear", mutates_args=())
def sparse_linear(
    values: Tensor,
    x: Tensor,
    pattern: list[Tensor],
    fwd_perm: Tensor,
    fwd_index: list[Tensor],
    bwd_perm: Tensor,
    bwd_index: list[Tensor],
    layout: str,
    layout_t: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    """``x @ A.T (+ bias)`` with autograd for ``values``, ``x`` and ``bias``, ``x``
    and the result row-major (:func:`linear`). Its backward computes ``d values
    = sddmm(pattern, dY^T, x^T)`` (only at stored entries), ``d x = (A^T dY^T)^T``
    with ``layout_mm`` on the transposed placement, and ``d bias = dY.sum(0)``."""
    return run_linear(values, x, fwd_perm, fwd_index, layout, shape, bias)


@sparse_linear.register_fake
def _sparse_linear_fake(
    values: Tensor,
    x: Tensor,
    pattern: list[Tensor],
    fwd_perm: Tensor,
    fwd_index: list[Tensor],
    bwd_perm: Tensor,
    bwd_index: list[Tensor],
    layout: str,
    layout_t: str,
    shape: list[int],
    bias: Tensor | None = None,
) -> Tensor:
    return _linear_fake(values, x, fwd_perm, fwd_index, layout, shape, bias)


def _linear_backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
    _not_batched(grad)
    values, x, bwd_perm, *rest = ctx.saved_tensors
    pattern, bwd_index = rest[: ctx.split], rest[ctx.split :]
    grad_t = transposed(grad.contiguous())  # dY^T, row-major (the kernels' B)
    d_values = d_x = None
    if ctx.needs_input_grad[0]:
        d_values = sddmm(list(pattern), grad_t, transposed(x), list(ctx.shape))
    if ctx.needs_input_grad[1]:
        shape_t = [ctx.shape[1], ctx.shape[0]]
        d_xt = layout_mm(values, grad_t, bwd_perm, list(bwd_index), ctx.layout_t, shape_t)
        d_x = transposed(d_xt)  # row-major, as x is
    d_bias = grad.sum(0) if _wants_bias(ctx) else None
    return _gradients(ctx, d_values, d_x, d_bias, pattern, bwd_index)


sparse_linear.register_autograd(_linear_backward, setup_context=_setup)
