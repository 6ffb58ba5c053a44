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
