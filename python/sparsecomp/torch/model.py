"""STen's programming model: sparsify a model's layers in place, and back.

``sparsify_(model, rules)`` replaces each module a rule selects (an
``nn.Linear``) by a :class:`~.nn.SparseLinear` holding the entries the rule's
sparsifier keeps, stored in the rule's layout::

    import sparsecomp.torch as st
    st.sparsify_(bert_layer, {
        "*.intermediate.dense": st.Rule("random_fraction:0.9", "csr"),
        "*.output.dense":       st.Rule("nm:1:10", "auto"),
        "attention.self.*":     st.Rule("scalar_fraction:0.8"),
    })

A rule's key is a glob over the qualified module names
(``fnmatch``; ``"*"`` matches every ``nn.Linear``) or a module class; the first
matching rule wins. A rule is a :class:`Rule`, a ``(sparsifier, layout)``
pair, or a sparsifier alone (CSR). Sparsifiers are those of
:mod:`sparsecomp.formats.sparsifiers`: ``threshold:T``,
``scalar_fraction:S`` (magnitude), ``random_fraction:S[:SEED]``,
``nm:N:M``, ``block_fraction:RxC:S``, or a ``Sparsifier``.

Some ``nn.Linear`` modules are left dense, with a warning naming each, since a
sparse layer there would be computed densely or would break the model:

* the ``out_proj`` of an ``nn.MultiheadAttention``, whose forward reads
  ``out_proj.weight`` itself (``F.multi_head_attention_forward``) rather than
  calling the module;
* a layer whose weight is tied to another parameter (a language model's head
  sharing its embedding's weight): replacing it would untie them;
* an instance of a subclass of ``nn.Linear`` with a ``forward`` of its own (a
  layer scaling its output, torch's quantization-aware ``qat.Linear``): a
  ``SparseLinear`` would compute ``x @ W.T + b`` in its place.

A layer used in several places (by several parents) is replaced in all of
them by one sparse layer. An ``nn.TransformerEncoderLayer`` whose ``linear1``
or ``linear2`` becomes sparse gets a forward pre-hook that does nothing: in
evaluation without gradients torch runs such a layer through a fused fast
path that reads ``linear1.weight`` as a dense tensor (``SparseLinear.weight``
builds one at every read), and any hook turns that path off, so the sparse
kernels run (:func:`densify_` removes the hook).

``densify_(model)`` turns every ``SparseLinear`` back into an ``nn.Linear``
with the same (masked) weight.
"""

from __future__ import annotations

import fnmatch
import warnings
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.sparsifiers import Sparsifier
from sparsecomp.torch.fuse import unfused
from sparsecomp.torch.modules import carry_hooks, module_paths
from sparsecomp.torch.nn import SparseLinear


@dataclass(frozen=True)
class Rule:
    """A selected weight keeps what ``sparsifier`` chooses, stored in ``layout``."""

    sparsifier: str | Sparsifier
    layout: str = "csr"


def _rule(value: Any) -> Rule:
    if isinstance(value, Rule):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Rule(*value)
    if isinstance(value, str | Sparsifier):
        return Rule(value)
    raise SparsecompError(
        f"a rule is a Rule, a (sparsifier, layout) pair or a sparsifier, not {value!r}"
    )


def mask_of(weight: torch.Tensor, sparsifier: str | Sparsifier) -> torch.Tensor:
    """The entries of ``weight`` that ``sparsifier`` keeps (a bool tensor)."""
    parsed = Sparsifier.parse(sparsifier)
    w = weight.detach().cpu()
    if w.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        w = w.float()  # numpy holds no such dtype; the mask is the same from float32
    keep = parsed.mask(w.numpy())
    return torch.from_numpy(keep).to(weight.device)


def _matches(key: Any, name: str, module: nn.Module) -> bool:
    if isinstance(key, type):
        return isinstance(module, key)
    return fnmatch.fnmatchcase(name, str(key))


def sparsify_(
    model: nn.Module, rules: Mapping[Any, Any], *, batch: int | None = None
) -> dict[str, SparseLinear]:
    """Replace the ``nn.Linear`` modules (and HuggingFace ``Conv1D``) ``rules`` select
    by ``SparseLinear``.

    ``rules`` maps a glob over qualified module names (``"*.intermediate.dense"``;
    ``"*"`` is every ``nn.Linear``) or a module class to a :class:`Rule`, a
    ``(sparsifier, layout)`` pair, or a sparsifier alone (layout CSR); the
    first matching rule wins. Sparsifiers: ``threshold:T``, ``scalar_fraction:S``,
    ``random_fraction:S[:SEED]``, ``nm:N:M``, ``nm:N:M:G``,
    ``block_fraction:RxC:S`` or a ``Sparsifier``; layouts: any short name
    (``csr``, ``bsr:RxC``, ``nm:N:M``, ``hyb``...) or ``"auto"``.
    ``batch``: the rows a call will see (``batch * sequence`` for a
    transformer), for layouts ``"auto"`` to choose now rather than on the first
    call. Returns the new modules by qualified name; a rule that selects
    nothing is an error (a misspelt name must not leave a model dense).
    """
    parsed = [(key, _rule(value)) for key, value in rules.items()]
    chosen: list[tuple[str, nn.Module, Rule]] = []
    used: set[int] = set()
    dense = kept_dense(model)
    left: list[str] = []
    paths = module_paths(model)
    for name, module in model.named_modules():
        if not is_linear(module):
            continue
        if not name:
            raise SparsecompError(
                "sparsify_ replaces submodules; wrap a bare nn.Linear in a model",
                hint="sparsify_(nn.Sequential(linear), rules), or SparseLinear.from_dense",
            )
        called = paths[id(module)] or [name]  # a shared layer: by any of its names
        for i, (key, rule) in enumerate(parsed):
            if any(_matches(key, n, module) for n in called):
                used.add(i)
                if id(module) in dense:
                    left.append(f"{name} ({dense[id(module)]})")
                else:
                    chosen.append((name, module, rule))
                break
    missed = [key for i, (key, _) in enumerate(parsed) if i not in used]
    unused = [repr(key) for key in missed]
    if unused:  # checked before any change: a failed call leaves the model as it was
        names = ", ".join(n for n, m in model.named_modules() if is_linear(m))
        already = [
            n for n, m in model.named_modules()
            if isinstance(m, SparseLinear) and any(_matches(k, n, m) for k in missed)
        ]  # fmt: skip
        shadowed = _shadowed(model, parsed, missed)
        if shadowed:
            raise SparsecompError(
                f"sparsify_: rule {shadowed[0]!r} selects only layers an earlier rule took "
                f"({shadowed[1]!r}): the first matching rule wins",
                hint="put the specific rules before the general ones",
            )
        raise SparsecompError(
            f"sparsify_: no nn.Linear (or transformers Conv1D) matched {', '.join(unused)}"
            + (f"; already a SparseLinear: {', '.join(already)}" if already else ""),
            hint="resparsify_ chooses a sparse layer's entries again; densify_ first for "
            "another layout"
            if already
            else (f"the linear modules: {names[:400]}" if names else "the model has none"),
        )
    lazy = [name for name, module, _ in chosen
            if isinstance(linear_weight(module), nn.parameter.UninitializedParameter)]  # fmt: skip
    if lazy:  # before any change, as below
        raise SparsecompError(
            f"sparsify_: {', '.join(lazy[:5])} are lazy layers (nn.LazyLinear) not called "
            "yet: their weights do not exist until the first call sets in_features",
            hint="run the model once on an input of the right size, then sparsify_ it",
        )
    meta = [name for name, module, _ in chosen if linear_weight(module).is_meta]
    if meta:  # before any change, as above
        raise SparsecompError(
            f"sparsify_: {', '.join(meta[:5])} hold no values (meta tensors): a pattern is "
            "chosen from a weight's values",
            hint="materialize them first (model.to_empty(device='cpu') and load the "
            "weights), or sparsify a model with weights and load_state_dict a sparse "
            "checkpoint into it",
        )
    done: dict[str, SparseLinear] = {}
    for name, module, rule in chosen:
        weight, bias = linear_weight(module), module.bias
        assert bias is None or isinstance(bias, torch.Tensor)
        keep = mask_of(weight, rule.sparsifier)
        sparse = SparseLinear.from_dense(weight, bias, rule.layout, keep, batch=batch)
        if isinstance(bias, nn.Parameter) and sparse.bias is not None:
            # the layer's own bias Parameter: one shared by two layers stays shared (a
            # copy each untied them: their gradients no longer summed), and an optimizer
            # made before sparsify_ still holds it
            sparse.bias = bias
        sparse.sparsifier = str(Sparsifier.parse(rule.sparsifier))
        if not isinstance(module, nn.Linear):  # densify_ gives the model its own class back
            sparse.dense_class = type(module)
        done[name] = sparse
    for (name, module, _), sparse in zip(chosen, done.values(), strict=True):
        carry_hooks(module, sparse)
        for path in paths[id(module)]:  # a shared layer stays shared
            _replace(model, path, sparse)
    for layer in model.modules():
        if isinstance(layer, nn.TransformerEncoderLayer) and not hasattr(layer, _NO_FAST_PATH):
            if isinstance(layer.linear1, SparseLinear) or isinstance(layer.linear2, SparseLinear):
                setattr(layer, _NO_FAST_PATH, layer.register_forward_pre_hook(_no_fast_path))
    for encoder in model.modules():
        # an encoder packs a padded batch into a nested tensor for its layers' fast path,
        # which the hook above turns off: the layers' slow path then got the nested
        # tensor ("NestedTensorImpl doesn't support sizes")
        if isinstance(encoder, nn.TransformerEncoder) and not hasattr(encoder, _NESTED):
            if any(hasattr(layer, _NO_FAST_PATH) for layer in encoder.layers):
                setattr(encoder, _NESTED, getattr(encoder, "use_nested_tensor", False))
                encoder.use_nested_tensor = False
    if left:
        warnings.warn(
            f"sparsify_ left {len(left)} selected nn.Linear dense: {'; '.join(left)}",
            stacklevel=2,
        )
    return done


#: the attribute of an ``nn.TransformerEncoderLayer`` holding the handle of the hook
#: that keeps torch's fast path off (see the module)
_NO_FAST_PATH = "_sparsecomp_no_fast_path"
#: the attribute of an ``nn.TransformerEncoder`` holding its ``use_nested_tensor`` as
#: it was before sparsify_ turned it off (densify_ gives it back)
_NESTED = "_sparsecomp_use_nested_tensor"


def _no_fast_path(module: nn.Module, args: Any) -> None:
    """A forward pre-hook that changes nothing: torch's ``TransformerEncoderLayer``
    takes its fused fast path only where no module of the layer has a hook."""
    return None


def kept_dense(model: nn.Module) -> dict[int, str]:
    """The ``nn.Linear`` modules of ``model`` that :func:`sparsify_` leaves dense,
    by ``id``, with the reason (see the module)."""
    why: dict[int, str] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.MultiheadAttention):
            why[id(module.out_proj)] = (
                f"nn.MultiheadAttention '{name}' reads its weight as a dense tensor"
            )
    owners: dict[int, list[str]] = defaultdict(list)
    for name, param in model.named_parameters(remove_duplicate=False):
        owners[id(param)].append(name)
    paths = module_paths(model)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and type(module).forward is not nn.Linear.forward:
            why.setdefault(
                id(module),
                f"its class {type(module).__module__}.{type(module).__qualname__} has a "
                "forward of its own, which a SparseLinear would not run",
            )
        constraint = _weight_constraint(module)
        if constraint:
            why.setdefault(
                id(module),
                f"its weight is computed by {constraint}, whose constraint a sparse "
                "weight would drop",
            )
        if is_linear(module):
            own = {f"{p}.weight" if p else "weight" for p in paths[id(module)]}
            others = [n for n in owners[id(module.weight)] if n not in own]
            if others:
                why.setdefault(id(module), f"its weight is tied to {', '.join(others)}")
    return why


def _weight_constraint(module: nn.Module) -> str:
    """What computes a layer's weight from other parameters (``parametrizations.weight_norm``,
    ``spectral_norm``, ``orthogonal``, or the hook of the older ``nn.utils.weight_norm``
    and ``spectral_norm``), or ``""``."""
    from torch.nn.utils import parametrize

    if parametrize.is_parametrized(module, "weight"):
        found = module.parametrizations["weight"]  # type: ignore[index]
        return ", ".join(type(p).__name__ for p in found) + " (a parametrization)"
    for hook in module._forward_pre_hooks.values():
        name = type(hook).__name__
        if name in ("WeightNorm", "SpectralNorm") and getattr(hook, "name", "") == "weight":
            return f"{name} (a forward pre-hook of torch.nn.utils)"
    return ""


def _shadowed(
    model: nn.Module, parsed: list[tuple[Any, Any]], missed: list[Any]
) -> tuple[Any, ...]:
    """A missed rule that matches a linear layer, and the earlier rule that took it; or ()."""
    paths = module_paths(model)
    for key in missed:
        for module in model.modules():
            names = paths[id(module)]
            if not is_linear(module) or not any(_matches(key, n, module) for n in names):
                continue
            for earlier, _ in parsed:
                if earlier is key:
                    break
                if any(_matches(earlier, n, module) for n in names):
                    return key, earlier
    return ()


def is_linear(module: nn.Module) -> bool:
    """An ``nn.Linear``, or HuggingFace's ``Conv1D`` (GPT-2's linear layers: ``x @ W +
    b`` with ``W`` stored ``in x out``), recognized by its name and shape without
    importing transformers."""
    if isinstance(module, nn.Linear):
        return True
    weight = getattr(module, "weight", None)
    return (
        type(module).__name__ == "Conv1D"
        and isinstance(getattr(module, "nf", None), int)
        and isinstance(weight, torch.Tensor)
        and weight.dim() == 2
        and weight.shape[1] == module.nf
    )


def linear_weight(module: nn.Module) -> torch.Tensor:
    """The module's weight as ``nn.Linear`` holds it (``out x in``)."""
    weight = module.weight
    assert isinstance(weight, torch.Tensor)
    return weight if isinstance(module, nn.Linear) else weight.t()


def _dense_module(sparse: SparseLinear) -> nn.Module:
    """``sparse`` as the dense module it replaced: an ``nn.Linear``, or a ``Conv1D``."""
    linear = sparse.to_dense_linear()
    kind = getattr(sparse, "dense_class", None)
    if kind is None:
        return linear
    dense = kind(sparse.out_features, sparse.in_features)  # Conv1D(nf, nx)
    with torch.no_grad():
        dense.weight.copy_(linear.weight.t())
        if sparse.bias is not None:
            dense.bias.copy_(linear.bias)
    return dense.to(device=linear.weight.device, dtype=linear.weight.dtype)


def densify_(model: nn.Module) -> list[str]:
    """Replace every ``SparseLinear`` by an ``nn.Linear`` with its weight (and an
    activation :func:`~.fuse.fuse_activations_` fused by its module); returns their names."""
    names = [n for n, m in model.named_modules() if isinstance(m, SparseLinear)]
    paths = module_paths(model)
    for name in names:
        module = model.get_submodule(name)
        assert isinstance(module, SparseLinear)
        unfused(module)  # a fused activation goes back into its own module
        dense = _dense_module(module)
        carry_hooks(module, dense)
        for path in paths[id(module)]:  # a shared layer stays shared
            _replace(model, path, dense)
    for layer in model.modules():
        handle = getattr(layer, _NO_FAST_PATH, None)
        if handle is not None:
            handle.remove()
            delattr(layer, _NO_FAST_PATH)
        if hasattr(layer, _NESTED):
            layer.use_nested_tensor = getattr(layer, _NESTED)
            delattr(layer, _NESTED)
    return names


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    if not name:
        raise SparsecompError("sparsify_ replaces submodules; wrap a bare nn.Linear in a model")
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)
