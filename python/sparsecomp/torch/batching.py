"""``torch.func.vmap`` rules for the ``sparsecomp::`` custom ops.

Without a rule, ``vmap`` over a sparsified model stops at the first custom op
("Batching rule not implemented"). The rules here:

* fold the batch into the op's own rows where only the dense operand is
  batched, the common case (``vmap`` over inputs): ``linear``,
  ``sparse_linear`` and ``sparse_act_linear`` read ``x`` as
  ``(B * n) x in`` (the batch joins the tokens), ``layout_mm`` and
  ``sparse_mm`` read ``b`` as ``k x (B * n)`` (the batch joins the
  columns): one kernel call for the whole batch;
* call the op once per batch element in any other case (a batched weight,
  bias or index, as in model ensembling; ``sddmm``, whose reduction is per
  element) and stack the results.

``torch.autograd`` goes through the ops as usual, under ``vmap`` too: their
backward passes call the ops, which then take these rules. ``torch.func``'s
gradient transforms are refused (:func:`.tracing.refuse_func_grad`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from sparsecomp.torch import activation, ops

Rule = Callable[..., tuple[Tensor, int]]


def _element(arg: Any, dim: Any, i: int) -> Any:
    """Batch element ``i`` of an argument batched at ``dim`` (None: not batched;
    a list of dims for a list of tensors)."""
    if dim is None:
        return arg
    if isinstance(arg, (list, tuple)):
        dims = dim if isinstance(dim, (list, tuple)) else [dim] * len(arg)
        return [_element(a, d, i) for a, d in zip(arg, dims, strict=True)]
    return arg.select(dim, i)


def _batched(dim: Any) -> bool:
    if isinstance(dim, (list, tuple)):
        return any(_batched(d) for d in dim)
    return dim is not None


def looped(op: Callable[..., Tensor]) -> Rule:
    """A rule calling ``op`` once per batch element, results stacked along dim 0."""

    def rule(info: Any, in_dims: Sequence[Any], *args: Any) -> tuple[Tensor, int]:
        outs = [
            op(*(_element(a, d, i) for a, d in zip(args, in_dims, strict=False)))
            for i in range(info.batch_size)
        ]
        return torch.stack(outs), 0

    return rule


def rows_folded(op: Callable[..., Tensor], at: int) -> Rule:
    """A rule for an op whose argument ``at`` is a row-major ``n x in`` input and
    whose result is ``n x out``: with only that argument batched, the batch is
    folded into its rows; otherwise :func:`looped`."""
    loop = looped(op)

    def rule(info: Any, in_dims: Sequence[Any], *args: Any) -> tuple[Tensor, int]:
        if not _only(in_dims, at):
            return loop(info, in_dims, *args)
        x = args[at].movedim(in_dims[at], 0)
        batch, n = x.shape[0], x.shape[1]
        flat = [*args[:at], x.reshape(batch * n, *x.shape[2:]), *args[at + 1 :]]
        y = op(*flat)
        return y.reshape(batch, n, *y.shape[1:]), 0

    return rule


def columns_folded(op: Callable[..., Tensor], at: int) -> Rule:
    """A rule for ``A @ b`` (``b`` argument ``at``, ``k x n``; the result ``m x n``):
    with only ``b`` batched, the batch joins its columns; otherwise :func:`looped`."""
    loop = looped(op)

    def rule(info: Any, in_dims: Sequence[Any], *args: Any) -> tuple[Tensor, int]:
        if not _only(in_dims, at):
            return loop(info, in_dims, *args)
        b = args[at].movedim(in_dims[at], 1)  # k x B x n
        k, batch, n = b.shape
        wide = [*args[:at], b.reshape(k, batch * n), *args[at + 1 :]]
        c = op(*wide)
        return c.reshape(c.shape[0], batch, n), 1

    return rule


def _only(in_dims: Sequence[Any], at: int) -> bool:
    """Whether argument ``at`` is the only batched one."""
    return _batched(in_dims[at]) and not any(_batched(d) for i, d in enumerate(in_dims) if i != at)


def register() -> None:
    """Register the rules (idempotent: a later registration replaces the earlier)."""
    ops.linear.register_vmap(rows_folded(ops.linear, 1))
    ops.sparse_linear.register_vmap(rows_folded(ops.sparse_linear, 1))
    activation.sparse_act_linear.register_vmap(rows_folded(activation.sparse_act_linear, 0))
    ops.layout_mm.register_vmap(columns_folded(ops.layout_mm, 1))
    ops.sparse_mm.register_vmap(columns_folded(ops.sparse_mm, 1))
    ops.sddmm.register_vmap(looped(ops.sddmm))


register()

