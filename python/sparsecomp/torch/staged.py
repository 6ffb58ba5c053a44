"""A sparse weight's operand for its kernels, staged once per placement and reused.

A :class:`~.nn.SparseLinear` keeps its ``values`` in CSR order; a kernel
reads them in the storage order of its layout. Each call used to gather the
values into a fresh array and wrap them, with the index buffers, in a fresh
``SparseTensor``. Both cost more than they look (BERT's 3072x768 FFN weight
at 90%, ``bsr:8x1``, 1024 tokens, on this project's 2-core machine: the
kernel 4.8-5.6 ms with one ``SparseTensor`` reused, 5.2-5.8 with a fresh
one over the same values, 5.9-6.6 with a fresh gather too): a fresh array
is fresh memory, and a fresh ``SparseTensor`` misses the runtime's C call
path, which knows a tensor by identity, and takes the Python one.

So :func:`operand` stages each placement once (keyed by its gather tensor
``perm``, which only the placement holds):

* with a gather (``perm`` not empty): a storage-order buffer of its own,
  refilled by the gather at every call (the parameter may have changed in
  any way, ``.data`` writes included, which leave no trace), and one
  ``SparseTensor`` over it. A lock per placement covers the refill and the
  kernel's call, so that two threads calling the same layer cannot mix
  their values;
* without (CSR, whose storage order is CSR order): a ``SparseTensor`` over
  the parameter's own memory, rebuilt only when that memory moves (a
  different address: a new tensor, ``.data =``); holding the parameter's
  array keeps the address from being reused meanwhile. Writes in place are
  seen by the kernel as they are.

The buffers cost memory: a layer's forward and backward placements keep one
storage-order copy of its values each (two copies of ``values`` at most;
the stacked weights of :mod:`.shared` one more).

Gathers are done by numpy on the calling thread: a torch op here wakes
torch's OpenMP workers, whose spinning then takes the cores from the kernel
that follows (a 768x3072 SpMM ran 13-16 ms instead of 7 ms after a torch
gather).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from torch import Tensor

from sparsecomp import forksafe
from sparsecomp.errors import FormatError
from sparsecomp.torch import structure

#: how a placement's gather reads the values: ``"fill"`` (``perm`` has ``-1``: a
#: padded copy of them), ``"take"`` (a plain gather), or ``(G, R, n)``: the
#: gather transposes ``G`` blocks of ``R x n`` values (see :func:`gather_kind`)
GatherKind = str | tuple[int, int, int]


def gather_kind(perm: np.ndarray) -> GatherKind:
    """How to gather through ``perm`` (:data:`GatherKind`).

    * ``"fill"`` only where ``perm`` reads fill: the padded copy of the values
      costs as much as the gather itself (1 ms for BERT's FFN weight at 40%);
    * ``(G, R, n)`` where the gather is a transpose of ``G`` blocks of ``R``
      rows of ``n`` values each, as it is for grouped n:m (``bsr:Rx1``) from
      CSR order when every row keeps ``n`` entries: a strided copy, which
      streams the values instead of reading them at random (a BertLayer's
      six gathers at 60% sparsity took 9-13 ms of a 75-95 ms forward as a
      ``take``).
    """
    if perm.size and int(perm.min()) < 0:
        return "fill"
    if perm.size > 1 and perm[0] == 0:
        return _blocks(perm) or "take"
    return "take"


def _blocks(perm: np.ndarray) -> tuple[int, int, int] | None:
    """``(G, R, n)`` if ``perm`` is ``arange`` as ``G x R x n`` read as ``G x n x R``."""
    n = int(perm[1])  # the next row of the block, n values on
    hits = np.flatnonzero(perm == 1)  # the next value of the first row
    if n < 2 or hits.size != 1:
        return None
    rows = int(hits[0])
    if rows < 2 or perm.size % (rows * n):
        return None
    shape = (perm.size // (rows * n), rows, n)
    expected = np.arange(perm.size).reshape(shape).transpose(0, 2, 1).reshape(-1)
    return shape if np.array_equal(perm, expected) else None


def gather(values: np.ndarray, perm: np.ndarray, kind: GatherKind, out: np.ndarray) -> None:
    """``out[:] = values[perm]``, ``-1`` reading a zero, the way ``kind`` says."""
    if isinstance(kind, tuple):
        groups, rows, n = kind
        np.copyto(out.reshape(groups, n, rows), values.reshape(kind).transpose(0, 2, 1))
    elif kind == "take":
        np.take(values, perm, out=out)
    else:
        padded = np.empty(values.shape[0] + 1, values.dtype)
        padded[:-1] = values
        padded[-1] = 0
        np.take(padded, perm, out=out)


class _Stage:
    """One placement's staged operand (see the module)."""

    __slots__ = (
        "buffer", "entries", "key", "kind", "lock", "order", "packed", "source", "tensor",
    )  # fmt: skip

    def __init__(self, perm: Tensor, index: list[Tensor], layout: str, shape: list[int]) -> None:
        self.packed = structure.tensor_of(layout, tuple(shape), tuple(index))
        self.key = _key(perm, index, layout, shape)
        self.order: np.ndarray = perm.detach().numpy()
        self.kind: GatherKind = gather_kind(self.order) if self.order.size else "take"
        #: the CSR-order values the gather reads (every entry is placed once; -1 is fill)
        self.entries = int(self.order.max()) + 1 if self.order.size else 0
        self.lock = forksafe.lock()
        self.buffer: np.ndarray | None = None  # storage-order values (with a gather)
        self.source: np.ndarray | None = None  # the parameter's own memory (without)
        self.tensor: Any = None

    def over_buffer(self, values: np.ndarray) -> Any:
        """The tensor over the refilled buffer (call with :attr:`lock` held)."""
        if values.shape != (self.entries,):  # a short one read fill for its last entries
            raise FormatError(
                f"values must be 1-D with {self.entries} elements (the pattern's entries), "
                f"got shape {tuple(values.shape)}"
            )
        if self.buffer is None or self.buffer.dtype != values.dtype:
            self.buffer = np.empty(self.order.shape[0], values.dtype)
            self.tensor = self.packed.with_values(self.buffer, copy=False)
        gather(values, self.order, self.kind, self.buffer)
        return self.tensor

    def over_source(self, values: np.ndarray) -> Any:
        """The tensor over the parameter's own memory (rebuilt where it moved; the
        check and the rebuild under :attr:`lock`, so that the pair stays one)."""
        with self.lock:
            source = self.source
            same = (
                source is not None
                and source.dtype == values.dtype
                and source.shape == values.shape
                and source.__array_interface__["data"][0] == values.__array_interface__["data"][0]
            )
            if not same:
                self.source = values
                self.tensor = self.packed.with_values(values, copy=False)
            return self.tensor


def _key(perm: Tensor, index: list[Tensor], layout: str, shape: list[int]) -> tuple[Any, ...]:
    """What a stage was built from: the placement's tensors (identity, memory and
    version: a placement is never edited, but a caller could) and the layout."""
    tensors = tuple((id(t), t.data_ptr(), structure.version(t)) for t in (perm, *index))
    return (tensors, layout, tuple(shape))


#: ``id(perm) -> its stage``, dropped with ``perm``
_stages: dict[int, _Stage] = {}
_stages_lock = forksafe.lock()


def _stage(perm: Tensor, index: list[Tensor], layout: str, shape: list[int]) -> _Stage:
    key = id(perm)
    found = _stages.get(key)
    if found is not None and found.key == _key(perm, index, layout, shape):
        return found
    stage = _Stage(perm, index, layout, shape)
    with _stages_lock:
        if key not in _stages:
            weakref.finalize(perm, _stages.pop, key, None)
        _stages[key] = stage
    return stage


@contextmanager
def operand(
    values: np.ndarray, perm: Tensor, index: list[Tensor], layout: str, shape: list[int]
) -> Iterator[Any]:
    """The sparse operand in ``layout``, ``values`` (CSR order) in storage order; use it
    inside the ``with`` block only (its buffer is refilled by the next call)."""
    stage = _stage(perm, index, layout, shape)
    if not stage.order.size:
        yield stage.over_source(values)
        return
    with stage.lock:
        yield stage.over_buffer(values)
