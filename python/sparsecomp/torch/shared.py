"""Sparse layers that read the same input, run as one kernel (inference).

Attention's query, key and value projections read the same hidden states;
so do a gated MLP's gate and up projections. Called one by one, each
:class:`~.nn.SparseLinear` packs the input anew, and each call pays its own
overhead. Stacked by rows into one weight, they are one kernel call that
packs the input once: BERT-base's three 768x768 projections at 90%
sparsity (``bsr:8x1``, 1024 tokens) took 5.2-5.5 ms one by one and 3.6-3.9
ms stacked on this project's 2-core machine.

The model's code calls the layers one by one, so the grouping is learned as
it runs, without tracing (HuggingFace's attention does not trace with
``torch.fx``):

* each call of a layer with an input is remembered; when the next call is
  of a layer that can share its kernel (same input width, dtype, layout,
  activation and bias or none) with the *same input* (the same tensor,
  unchanged), the first learns that the second follows it;
* when a layer that has followers is called, it runs the chain
  (itself, its follower, the follower's...) as one stacked kernel, returns
  its own rows and keeps the others' as *pending* for that input; a
  follower called with that input takes its rows from there.

Only the most recent input's results are pending (that input held until they
are taken or replaced): a follower that is not
called with it (a cross-attention whose key reads another tensor) loses its
link, and runs alone. So the first forward pass runs the layers one by one
and learns; later ones stack them. The stacked weight is the members'
patterns stacked by rows, placed in the layout once; its values are the
members' (CSR order, concatenated: the CSR order of the stack) at every
call. Only where no gradient is recorded and not under ``torch.compile``
(:meth:`SparseLinear.forward` decides): autograd and compiled graphs run
each layer by itself.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from sparsecomp import forksafe
from sparsecomp.torch import ops, structure

#: one lock over the tables below (calls from several threads stay consistent)
_lock = forksafe.lock()
#: layer -> its learned follower (weakly held on both sides)
_next: weakref.WeakKeyDictionary[Any, weakref.ref[Any]] = weakref.WeakKeyDictionary()


@dataclass
class _Last:
    """The most recent call: its input (weakly: a dead input's marks matched by a
    new tensor only teach a link, which rows never taken undo) and layer."""

    x: weakref.ref[Tensor]
    key: tuple[Any, ...]
    layer: weakref.ref[Any]


@dataclass
class _Pending:
    """Rows of a stacked call not yet taken, for the input ``x``: per layer, the layer,
    its rows, and the values and bias it was computed with."""

    x: Tensor
    key: tuple[Any, ...]
    rows: dict[int, tuple[weakref.ref[Any], Tensor, np.ndarray, np.ndarray | None]]
    #: a copy of an inference tensor ``x``, whose changes no version counter shows
    #: (:func:`.structure.snapshot`)
    snapshot: Tensor | None = None


_last: _Last | None = None
_pending: _Pending | None = None
#: the stacked placements kept at most (the oldest go first)
MAX_STACKS = 64
#: chain (layers' ids and pattern versions) -> (layers, its stacked placement tensors)
_stacks: dict[tuple[Any, ...], tuple[list[weakref.ref[Any]], tuple[Any, ...]]] = {}


def _input_key(x: Tensor) -> tuple[Any, ...]:
    return (id(x), x.data_ptr(), structure.version(x), tuple(x.shape), tuple(x.stride()), x.dtype)


def _stackable(a: Any, b: Any) -> bool:
    """Whether layers ``a`` and ``b`` can share a stacked kernel."""
    return (
        a is not b
        and a._row_major
        and b._row_major
        and a.in_features == b.in_features
        and a.values.dtype == b.values.dtype
        and a.layout == b.layout
        and a.activation == b.activation
        and (a.bias is None) == (b.bias is None)
    )


def _chain(layer: Any) -> list[Any]:
    chain = [layer]
    link = _next.get(layer)
    while link is not None:
        follower = link()
        if follower is None or follower in chain or not _stackable(layer, follower):
            break
        chain.append(follower)
        link = _next.get(follower)
    return chain


def run(layer: Any, x: Tensor, flat: Tensor) -> Tensor:
    """``layer(x)`` (``flat``: ``x`` as a matrix) as the layer's row-major kernel
    computes it, stacked with its learned followers (see the module)."""
    global _last, _pending
    key = _input_key(x)
    with _lock:
        taken = None
        if _pending is not None and _pending.key == key and _pending.x is x:
            found = _pending.rows.pop(id(layer), None)
            if found is not None and found[0]() is layer and _unchanged(layer, *found[2:]):
                if structure.unchanged(x, _pending.snapshot):
                    taken = found[1]
                else:  # changed in place since (inference mode): no longer a shared input
                    _forget(layer)
            if not _pending.rows:
                _pending = None  # all taken: hold nothing
        last = _last
        if last is not None and last.key == key and last.x() is x:
            previous = last.layer()
            if previous is not None and _stackable(previous, layer):
                _next[previous] = weakref.ref(layer)
        _last = _Last(weakref.ref(x), key, weakref.ref(layer))
        chain = _chain(layer) if taken is None else [layer]
    if taken is not None:
        return taken
    if len(chain) == 1:
        return _alone(layer, flat)
    outputs, values, biases = _stacked(chain, flat)
    with _lock:
        if _pending is not None:  # rows never taken: those links were wrong
            for ref, *_ in _pending.rows.values():
                if (lost := ref()) is not None:
                    _forget(lost)
        rows = {
            id(m): (weakref.ref(m), out, v, b)
            for m, out, v, b in zip(chain[1:], outputs[1:], values[1:], biases[1:], strict=True)
        }
        _pending = _Pending(x, key, rows, structure.snapshot(x))
    return outputs[0]


def _forget(layer: Any) -> None:
    """Drop the links to ``layer``: it does not follow the layer before it (under
    :data:`_lock`)."""
    for before, link in list(_next.items()):
        if link() is layer:
            del _next[before]


def _unchanged(layer: Any, values: np.ndarray, bias: np.ndarray | None) -> bool:
    """Whether ``layer``'s values and bias are still those its pending rows used
    (compared, not trusted to version counters: ``.data`` writes leave none)."""
    if not np.array_equal(layer.values.detach().numpy(), values):
        return False
    return bias is None or np.array_equal(layer.bias.detach().numpy(), bias)


def _alone(layer: Any, flat: Tensor) -> Tensor:
    _, fwd_perm, fwd_index, *_, lay, _ = layer._placed
    shape = [layer.out_features, layer.in_features]
    return ops.run_linear(
        layer.values, flat, fwd_perm, fwd_index, lay, shape, layer.bias, layer.activation
    )


def _placement(chain: list[Any]) -> tuple[Any, ...]:
    """The chain's stacked placement: ``(perm, index, layout, shape)`` as tensors."""
    key = tuple((id(m), m.indptr.data_ptr(), structure.version(m.indptr), m.layout) for m in chain)
    found = _stacks.get(key)
    if found is not None and all(r() is m for r, m in zip(found[0], chain, strict=True)):
        return found[1]
    offsets = np.cumsum([0] + [int(m.indptr[-1]) for m in chain])
    tails = [m.indptr[1:].numpy().astype(np.int64) + off for m, off in zip(chain, offsets)]
    indptr = np.concatenate([[0], *tails])
    indices = np.concatenate([m.indices.numpy() for m in chain])
    shape = (sum(m.out_features for m in chain), chain[0].in_features)
    placed = structure.place(indptr, indices, shape, chain[0].layout)
    index = [torch.from_numpy(a.copy()) for a in placed.index]
    structure.remember(placed.layout, placed.shape, tuple(index), placed.tensor)
    built = (torch.from_numpy(placed.perm), index, placed.layout, list(shape))
    with _lock:
        for old, (refs, _) in list(_stacks.items()):  # chains whose layers are gone
            if any(r() is None for r in refs):
                del _stacks[old]
        while len(_stacks) >= MAX_STACKS:
            del _stacks[next(iter(_stacks))]
        _stacks[key] = ([weakref.ref(m) for m in chain], built)
    return built


def _stacked(
    chain: list[Any], flat: Tensor
) -> tuple[list[Tensor], list[np.ndarray], list[np.ndarray | None]]:
    """Each layer's rows of the stacked product, and the values and biases used."""
    perm, index, lay, shape = _placement(chain)
    # numpy, not torch.cat: a torch op wakes torch's OpenMP workers (see .staged)
    values = [m.values.detach().numpy().copy() for m in chain]
    biases = [None if m.bias is None else m.bias.detach().numpy().copy() for m in chain]
    bias = None
    if chain[0].bias is not None:
        bias = torch.from_numpy(np.concatenate([b for b in biases if b is not None]))
    y = ops.run_linear(
        torch.from_numpy(np.concatenate(values)), flat, perm, index, lay, shape, bias,
        chain[0].activation,
    )  # fmt: skip
    bounds = np.cumsum([0] + [m.out_features for m in chain])
    # each layer's columns copied out: a column slice of the stacked result is not
    # contiguous, where nn.Linear's output is (a caller's .view(-1) failed)
    whole = y.numpy()
    outputs = [
        torch.from_numpy(np.ascontiguousarray(whole[:, int(a) : int(b)]))
        for a, b in itertools.pairwise(bounds)
    ]
    return outputs, values, biases
