"""What an optimizer step does to a sparse weight: the two policies.

**Masked updates (the default, nothing to do).** A :class:`~.nn.SparseLinear`
stores only its kept entries: ``values`` is the parameter and its gradient
exists only there (SDDMM). Any ``torch.optim`` optimizer, weight decay and
momentum included, therefore updates the kept entries and nothing else: the
pattern never changes, and a dropped entry stays exactly zero.

**Re-sparsify every N steps.** For gradual pruning, call
:func:`resparsify_` (or let :class:`ResparsifyEvery` call it every N
optimizer steps): each sparse layer's current weight is sparsified again with
its sparsifier, or a new one (a higher sparsity, say), and keeps the entries
chosen *among those it has*: a pattern only shrinks (regrowing dropped
entries needs a dense gradient, which this path never computes). The
optimizer's per-entry state (Adam's moments...) is cut to the same entries,
and the layer is packed again in its layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.sparsifiers import Sparsifier
from sparsecomp.torch.model import mask_of
from sparsecomp.torch.nn import SparseLinear
from sparsecomp.torch.structure import coordinates, set_entries


def resparsify_(
    model: nn.Module,
    sparsifier: str | Sparsifier | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, int]:
    """Sparsify every ``SparseLinear`` of ``model`` again, in place; see the module.

    ``sparsifier``: the one to apply (default: each layer's own, from
    ``sparsify_``). Returns the entries each layer keeps, by name.
    """
    kept: dict[str, int] = {}
    for name, layer in model.named_modules():
        if not isinstance(layer, SparseLinear):
            continue
        chosen = sparsifier if sparsifier is not None else layer.sparsifier
        if not chosen:
            raise SparsecompError(
                f"resparsify_: layer '{name}' has no sparsifier of its own; pass one"
            )
        with torch.no_grad():
            dense = layer.weight
            stored = torch.zeros_like(dense, dtype=torch.bool)
            rows, cols = _entries(layer)
            stored[rows, cols] = True
            keep = (mask_of(dense, chosen) & stored)[rows, cols]
        _shrink(layer, keep, optimizer)
        kept[name] = int(keep.sum())
    if not kept:
        raise SparsecompError("resparsify_: the model has no SparseLinear layer")
    return kept


def _entries(layer: SparseLinear) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column of each stored entry, in CSR order (as torch tensors)."""
    rows, cols = coordinates(layer.indptr.cpu().numpy(), layer.indices.cpu().numpy())
    return torch.from_numpy(rows), torch.from_numpy(cols)


def _shrink(layer: SparseLinear, keep: torch.Tensor, optimizer: Any) -> None:
    """Keep the entries ``keep`` marks (in CSR order), the optimizer's state with them."""
    old = layer.values
    if optimizer is not None:
        state = optimizer.state.get(old, {})
        for key, value in list(state.items()):
            if isinstance(value, torch.Tensor) and value.shape == old.shape:
                state[key] = value[keep].clone()
    rows, _ = _entries(layer)
    counts = torch.bincount(rows[keep], minlength=layer.out_features)
    with torch.no_grad():
        layer.indptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(torch.int32)
        layer.indices = layer.indices[keep].clone()
        set_entries(old, old.data[keep].clone())
        if old.grad is not None:
            old.grad = old.grad[keep].clone()
    layer._adopt(layer.layout)


class ResparsifyEvery:
    """Call :func:`resparsify_` every ``every`` optimizer steps.

    ``schedule(step) -> sparsifier`` gives the sparsifier at a step (gradual
    pruning); without it each layer's own is applied again. Call
    :meth:`step` after each ``optimizer.step()``.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        every: int,
        schedule: Callable[[int], str | Sparsifier] | None = None,
    ) -> None:
        if every < 1:
            raise SparsecompError(f"ResparsifyEvery needs every >= 1, got {every}")
        self.model, self.optimizer, self.every, self.schedule = model, optimizer, every, schedule
        self.steps = 0

    def step(self) -> dict[str, int] | None:
        """Count a step; re-sparsify on every ``every``-th. Returns the kept counts then."""
        self.steps += 1
        if self.steps % self.every:
            return None
        chosen = self.schedule(self.steps) if self.schedule is not None else None
        return resparsify_(self.model, chosen, self.optimizer)
