"""Fuse a model's activations into the sparse layers that produce them.

``fuse_activations_(model)`` finds each :class:`~.nn.SparseLinear` whose output
goes straight into an activation, GELU (exact, ``erf`` form) or ReLU, and
lets the layer's kernel apply it (``SparseLinear.activation``): the compiler
evaluates the activation on the accumulators in registers as it stores them
(:mod:`sparsecomp.lowering.epilogue`), instead of a second pass of torch over
the layer's output. The activation module becomes an ``nn.Identity``. A layer
used in several places of the model (by several parents) is not fused: the
activation would apply in every one of them::

    import sparsecomp.torch as st
    st.sparsify_(bert_layer, {"*": st.Rule("nm:1:10:8", "bsr:8x1")})
    st.fuse_activations_(bert_layer)   # ['intermediate.dense']

How pairs are found: each module holding a ``SparseLinear`` is traced one
level deep with ``torch.fx`` (its children are leaves). A pair is a call of
the layer whose only use is a call of a child module that computes GELU or
ReLU: recognized by what it computes on a probe (``nn.GELU()``,
HuggingFace's ``GELUActivation``, ``nn.ReLU``...), not by its class. Modules
whose ``forward`` fx cannot trace (data-dependent control flow) and
activations called as functions in ``forward`` (``F.gelu(self.fc(x))``,
which only a rewrite of ``forward`` could change) are left as they are.

The fused kernel runs where no gradient is recorded (inference); under
autograd the layer applies the activation in torch after its kernel, so the
result and the gradients are those of the unfused model. The state dict is
unchanged. :func:`~.model.densify_` puts the activation module back.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import fx, nn

from sparsecomp.errors import SparsecompError
from sparsecomp.torch.modules import has_hooks, module_paths
from sparsecomp.torch.nn import TORCH_ACTIVATIONS, SparseLinear

LOG = logging.getLogger("sparsecomp")

#: the attribute of a fused layer naming what it replaced: ``(parent, name, module)``
UNFUSED = "_unfused"


def activation_of(module: Any) -> str:
    """The fused activation ``module`` computes (``"gelu"``, ``"relu"``), or ``""``.

    Found by running it on a probe of values in ``[-6, 6]``: a module with
    parameters or buffers, or one that fails or changes the shape, is none.
    """
    if not isinstance(module, nn.Module) or any(True for _ in module.parameters()):
        return ""
    if any(True for _ in module.buffers()):
        return ""
    probe = torch.linspace(-6.0, 6.0, 121, dtype=torch.float64)
    try:
        with torch.no_grad():
            out = module(probe.clone())
    except Exception:
        return ""
    if not isinstance(out, torch.Tensor) or out.shape != probe.shape:
        return ""
    for name, fn in TORCH_ACTIVATIONS.items():
        if torch.allclose(out.double(), fn(probe), rtol=1e-12, atol=1e-12):
            return name
    return ""


class _OneLevel(fx.Tracer):
    """Traces a module's own ``forward``; every child module is a leaf."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return True


def _an_activation(module: nn.Module) -> bool:
    """Whether ``module`` looks like an activation by its class's name (for the message
    of an activation that is not one the kernels compute)."""
    name = type(module).__name__.lower()
    return any(w in name for w in ("gelu", "relu", "silu", "swish", "tanh", "sigmoid", "activ"))


def _pairs(parent: nn.Module) -> tuple[list[tuple[str, str]], list[str]] | None:
    """``(layer, activation)`` child names of ``parent`` whose calls chain directly, and
    the layers that do so but are called more than once (in a loop: not fused); None
    where fx cannot trace ``parent``'s forward."""
    if not any(isinstance(child, SparseLinear) for child in parent.children()):
        return [], []
    try:
        graph = _OneLevel().trace(parent)
    except Exception as why:
        LOG.info("sparsecomp.torch: fuse_activations_ cannot trace %s: %s",
                 type(parent).__name__, str(why).splitlines()[0] if str(why) else why)  # fmt: skip
        return None
    calls: dict[str, int] = {}
    repeated: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
    found = []
    for node in graph.nodes:
        if node.op != "call_module" or "." in node.target:
            continue
        if not isinstance(getattr(parent, node.target, None), SparseLinear):
            continue
        users = list(node.users)
        if len(users) != 1 or users[0].op != "call_module" or "." in users[0].target:
            continue
        act = users[0]
        if act.args != (node,) or act.kwargs:
            continue
        if calls[act.target] != 1 or calls[node.target] != 1:
            repeated[str(node.target)] = calls[node.target]
            continue
        found.append((str(node.target), str(act.target)))
    return found, [f"{name} ({n} calls in forward)" for name, n in repeated.items()]


def fuse_activations_(model: nn.Module) -> list[str]:
    """Fuse each ``SparseLinear -> GELU/ReLU`` pair of ``model`` (see the module).

    Returns the qualified names of the layers it fused. None found, and none
    fused before, is an error (with the reason most likely).
    """
    done, shared, untraced, hooked, others = [], [], [], [], []
    paths = module_paths(model)
    repeated: list[str] = []
    for name, parent in list(model.named_modules()):
        traced = _pairs(parent)
        if traced is None:
            untraced.append(name or type(parent).__name__)
            continue
        pairs, again = traced
        repeated += [f"{name}.{r}" if name else r for r in again]
        for layer_name, act_name in pairs:
            layer = getattr(parent, layer_name)
            act = getattr(parent, act_name)
            kind = activation_of(act)
            if not kind and _an_activation(act):  # GPT-2's gelu_new: the tanh form
                others.append(f"{name}.{act_name}" if name else act_name)
                others[-1] += f" ({type(act).__name__})"
            if not kind or layer.activation:
                continue
            if len(paths[id(layer)]) > 1:  # its other parents would get the activation too
                shared.append(", ".join(paths[id(layer)]))
                LOG.info("sparsecomp.torch: %s not fused: the layer is shared", shared[-1])
                continue
            if has_hooks(layer) or has_hooks(getattr(parent, act_name)):
                # fused, the layer's hooks would see the activation's output, and the
                # activation's would run on an nn.Identity
                hooked.append(f"{name}.{layer_name}" if name else layer_name)
                LOG.info("sparsecomp.torch: %s not fused: it has hooks", hooked[-1])
                continue
            setattr(layer, UNFUSED, (parent, act_name, getattr(parent, act_name)))
            layer.activation = kind
            setattr(parent, act_name, nn.Identity())
            qualified = f"{name}.{layer_name}" if name else layer_name
            LOG.info("sparsecomp.torch: %s applies %s in its kernel", qualified, kind)
            done.append(qualified)
    fused = any(isinstance(m, SparseLinear) and m.activation for m in model.modules())
    if not fused and hooked:
        raise SparsecompError(
            "fuse_activations_: the SparseLinear layers that feed a GELU or ReLU module "
            f"have forward hooks, or their activations do ({', '.join(hooked)}): fused, "
            "a layer's hook would see the activation's output"
        )
    if not fused and (shared or repeated):
        shared += repeated
        raise SparsecompError(
            "fuse_activations_: the SparseLinear layers that feed a GELU or ReLU module "
            f"are each used in several places ({'; '.join(shared)}): fused, the "
            "activation would apply in all of them"
        )
    if not fused:
        where = (
            f"; torch.fx could not trace the forward of {', '.join(untraced[:4])}"
            + (" ..." if len(untraced) > 4 else "")
            + " (data-dependent control flow), whose layers are left as they are"
            if untraced
            else ""
        )
        if others:
            where += (
                f"; the activations after SparseLinear layers ({', '.join(others[:3])}"
                + (" ..." if len(others) > 3 else "")
                + ") compute other functions than exact GELU or ReLU (the tanh GELU, SiLU...)"
            )
        raise SparsecompError(
            f"fuse_activations_: no SparseLinear feeds a GELU or ReLU module directly{where}",
            hint="sparsify_ the linear layers first; an activation called as a function "
            "in forward (F.gelu(self.fc(x))) cannot be fused",
        )
    return done


def unfused(layer: SparseLinear) -> None:
    """Put back the activation module ``layer`` replaced (for ``densify_``)."""
    saved = getattr(layer, UNFUSED, None)
    if saved is None:
        return
    parent, act_name, module = saved
    setattr(parent, act_name, module)
    layer.activation = ""
    delattr(layer, UNFUSED)
