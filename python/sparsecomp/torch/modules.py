"""What ``sparsify_``, ``densify_`` and ``fuse_activations_`` read of a model's
modules and carry from a module to the one replacing it: the names each module
has in the model, and the hooks torch runs at its calls."""

from __future__ import annotations

from collections import defaultdict

from torch import nn


def module_paths(model: nn.Module) -> dict[int, list[str]]:
    """Every qualified name of each module of ``model``, by ``id``: a module shared
    by several parents (ALBERT's layers) has several."""
    paths: dict[int, list[str]] = defaultdict(list)
    for name, module in model.named_modules(remove_duplicate=False):
        paths[id(module)].append(name)
    return paths


#: A module's hooks on its calls (forward and backward), as torch keeps them.
HOOKS = ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
         "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_backward_hooks",
         "_backward_pre_hooks")  # fmt: skip


def has_hooks(module: nn.Module) -> bool:
    """Whether hooks run at ``module``'s calls (``register_forward_hook`` and the like)."""
    return any(getattr(module, name, None) for name in HOOKS)


def carry_hooks(old: nn.Module, new: nn.Module) -> None:
    """Give ``new`` the hooks of the ``old`` module it replaces: the same tables, so that
    the handles their ``register_*`` calls returned still remove them (a replaced
    layer's hooks were dropped, and a hook that rescaled its output no longer ran)."""
    if not has_hooks(old):
        return
    for name in HOOKS:
        if hasattr(old, name):
            setattr(new, name, getattr(old, name))
    if hasattr(old, "_is_full_backward_hook"):
        new._is_full_backward_hook = old._is_full_backward_hook
