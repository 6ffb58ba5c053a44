"""Optimizer state of a ``values`` parameter whose pattern a checkpoint replaced.

``load_state_dict`` into a :class:`~.nn.SparseLinear` adopts the saved
pattern: ``values`` stays the same parameter (optimizers hold it), with one
number per saved entry. An optimizer's per-entry state (Adam's moments) is of
the old pattern: of another length, its next ``step()`` failed inside torch
("The size of tensor a (51) must match the size of tensor b (256)"); of the
same length, it would have moved other entries' moments onto these.

A loaded pattern that differs from the layer's marks ``values``
(:func:`pattern_replaced`); an optimizer step pre-hook (registered with torch
once, at the first such load) drops the state an optimizer holds for a marked
parameter before the step that follows the load, with a warning, so that the
optimizer starts those entries afresh, as it does a new parameter.
``resparsify_(model, spec, optimizer)`` is the path that keeps the state (it
cuts it to the entries kept).
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import torch

#: The attribute a ``values`` parameter carries: how many patterns were loaded into it.
VERSION = "_sparsecomp_pattern"
#: Per optimizer: per marked parameter, its pattern version and the state object the
#: optimizer held for it at its last step.
_seen: weakref.WeakKeyDictionary[Any, dict[int, tuple[int, int]]] = weakref.WeakKeyDictionary()
_registered = False


def track(values: torch.Tensor) -> None:
    """Follow ``values`` (a new layer's): optimizers' steps note its pattern version."""
    global _registered
    if not hasattr(values, VERSION):
        setattr(values, VERSION, 0)
    if not _registered:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(_drop_stale_state)
        _registered = True


def pattern_replaced(values: torch.Tensor) -> None:
    """Mark ``values``: a load gave it another pattern."""
    track(values)
    setattr(values, VERSION, getattr(values, VERSION) + 1)


def _drop_stale_state(optimizer: Any, args: Any, kwargs: Any) -> None:
    seen = _seen.setdefault(optimizer, {})
    for group in optimizer.param_groups:
        for p in group["params"]:
            version = getattr(p, VERSION, None)
            if version is None:
                continue
            state = optimizer.state.get(p)
            before = seen.get(id(p))
            if state:
                # a load since this optimizer's last step with p (or before its first)
                loaded = before[0] != version if before is not None else version > 0
                misfit = loaded and any(
                    isinstance(v, torch.Tensor) and v.dim() and v.shape != p.shape
                    for v in state.values()
                )  # (only after a load: LBFGS keeps flat state of every parameter under
                # the first, which was dropped at each step, silently restarting it)
                # the same state object as at the last step, from before the load (a
                # state the optimizer's own load_state_dict brought is another object)
                older = loaded and before is not None and before[1] == id(state)
                if misfit or older:
                    del optimizer.state[p]
                    warnings.warn(
                        f"{type(optimizer).__name__}: the state of a SparseLinear's values "
                        "was dropped: a state_dict loaded another pattern into the layer, and "
                        "the state was of the old one (it starts afresh, as for a new "
                        "parameter)",
                        stacklevel=3,
                    )
            # the object the step fills (optimizers take state[p] from their defaultdict)
            seen[id(p)] = (version, id(optimizer.state[p]))
