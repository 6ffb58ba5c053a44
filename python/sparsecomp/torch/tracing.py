"""Whether a layer's call is traced or transformed, so that it takes the custom ops.

In plain eager calls the layers take shortcuts that read tensors' memory
(the ops' implementations called directly, transposes cached by address,
weights kept by version counter). Under ``torch.compile`` (fake tensors) and
under ``torch.func``'s transforms (``vmap``'s batched tensors, ``grad``'s
wrappers) tensors have no memory of their own there, so the layers call the
``sparsecomp::`` custom ops, whose fake implementations and ``vmap`` rules
(:mod:`.batching`) serve those callers.
"""

from __future__ import annotations

import torch
from torch import Tensor

from sparsecomp.errors import SparsecompError


def traced(*tensors: Tensor | None) -> bool:
    """Whether ``torch.compile`` traces this call or any of ``tensors`` is wrapped by
    a ``torch.func`` transform."""
    if torch.compiler.is_compiling():
        return True
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    return any(t is not None and wrapped(t) for t in tensors)


def refuse_func_grad(*tensors: Tensor | None) -> None:
    """Raise where a ``torch.func`` gradient transform (``grad``, ``jacrev``, ``vjp``)
    tracks any of ``tensors``: the differentiable ops take lists of index
    tensors, and torch runs the autograd of such custom ops through the old
    ``autograd.Function`` form, which ``torch.func`` refuses with a message
    about ``setup_context``. ``torch.autograd`` (``loss.backward()``) and
    ``vmap`` without a gradient transform work."""
    if torch.compiler.is_compiling():
        return
    tracking = torch._C._functorch.is_gradtrackingtensor
    if any(t is not None and tracking(t) for t in tensors):
        raise SparsecompError(
            "torch.func's gradient transforms (grad, jacrev, vjp) cannot differentiate "
            "sparsecomp's layers",
            hint="use torch.autograd (loss.backward() or torch.autograd.grad); vmap works "
            "without a gradient transform",
        )


def refuse_jit() -> None:
    """Raise under ``torch.jit.trace``: a layer's eager call reads its tensors' memory
    outside the dispatcher (the kernels called directly), so the trace recorded the
    example's output as a constant and returned it for every input."""
    if torch.jit.is_tracing():
        raise SparsecompError(
            "torch.jit.trace cannot record sparsecomp's layers (it would keep the "
            "example's output as a constant)",
            hint="use torch.compile, or torch.export for a graph",
        )


def refuse_script(module: object) -> object:
    """``__prepare_scriptable__`` of sparsecomp's modules: TorchScript cannot compile
    them (their calls go through Python and compiled kernels)."""
    raise SparsecompError(
        f"torch.jit.script cannot compile {type(module).__name__} (TorchScript)",
        hint="use torch.compile, or torch.export for a graph",
    )


def members(t: Tensor) -> Tensor:
    """A tensor under ``vmap`` (a batched tensor, any number of levels) as the plain
    tensor of its members, their batch dimensions first and flattened into one; a
    plain tensor as one member."""
    functorch = torch._C._functorch
    levels = 0
    while functorch.is_batchedtensor(t):
        bdim = functorch.maybe_get_bdim(t)
        t = functorch.get_unwrapped(t).movedim(bdim, 0)
        levels += 1
    return t.reshape(-1, *t.shape[levels:]) if levels else t.unsqueeze(0)


def is_batched(t: Tensor) -> bool:
    """Whether ``t`` is a batched tensor of ``vmap``."""
    return bool(torch._C._functorch.is_batchedtensor(t))
