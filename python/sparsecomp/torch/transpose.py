"""Transposes of activations and gradients, by blocks of rows.

A sparse linear layer computes ``Y^T = W X^T`` (see :mod:`.nn`), so its
input is transposed on the way in, and in the backward pass the gradient of
``Y`` on the way to the kernels. torch's own ``x.t().contiguous()`` is slow
for these shapes (see :func:`transposed`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from sparsecomp.torch import structure
from sparsecomp.torch.tracing import traced

#: rows transposed at a time by :func:`transposed`
TRANSPOSE_ROWS = 128


def transposed(x: Tensor) -> Tensor:
    """``x.t().contiguous()`` for a matrix, by blocks of rows.

    torch's own transpose of a 1024 x 3072 float32 matrix took 11.7 ms here
    (a copy of it 0.8 ms): it walks the source with a 12 KiB stride. Blocks
    of 128 rows, transposed each into its columns of the result
    (``torch.cat``), took 3.5 ms. The gradient is transposed back the same
    way, by one autograd node (:class:`_Transpose`): autograd through the
    blocks themselves gave each block's gradient a zero-filled copy of the
    whole input, added up (58 ms of a BertLayer's 280 ms forward and
    backward). Under ``torch.compile`` and ``torch.func`` (:func:`.tracing.traced`)
    torch's own transpose is used.
    """
    rows = x.shape[0]
    if traced(x) or rows <= 2 * TRANSPOSE_ROWS or x.t().is_contiguous():
        return x.t().contiguous()
    return _Transpose.apply(x)


class _Last(threading.local):
    """The last input :func:`transposed_input` transposed, its transpose, and the
    layers that have read it."""

    key: tuple[Any, ...] | None = None
    source: weakref.ref[Tensor] | None = None
    result: Callable[[], Tensor | None] | None = None
    readers: set[int] = set()  # noqa: RUF012  (replaced, never mutated in place)


_last = _Last()


def transposed_input(x: Tensor, reader: object) -> Tensor:
    """``x`` (``... x features``) as a ``features x rows`` contiguous matrix, by
    :func:`transposed`, reusing the transpose when another layer just took it.

    BERT's query, key and value projections read one ``hidden_states``: it is
    transposed once, not three times (1.1 ms each for 1024 x 768 here), and
    in training the three gradients meet before one transpose back. Only the
    last transpose is kept (per thread), and it serves each ``reader`` (a
    layer) once: the same layer calling again starts a new transpose, as a
    new forward pass does, so an input changed in place between two passes
    (``gradcheck`` perturbs ``.data``, which no version counter sees) is never
    read stale. A hit also needs the same tensor object with the same shape,
    strides and version counter, under the same grad mode and ``requires_grad``;
    an inference tensor,
    which has no version counter, is compared with the kept transpose (a
    residual block in inference mode adds into its input between two layers). A transpose that
    is part of an autograd graph is held weakly (the layer that took it keeps
    it for its backward), so no graph outlives its pass because of this.
    """
    if traced(x):  # torch.compile or torch.func: no state kept (the compiler's own transpose)
        return transposed(x.reshape(-1, x.shape[-1]))
    # requires_grad too: requires_grad_() between two layers moves no version counter,
    # and the second reused a transpose with no autograd link to x (x.grad stayed None)
    grad = (torch.is_grad_enabled(), x.requires_grad)
    key = (x.data_ptr(), tuple(x.shape), x.stride(), structure.version(x), grad)
    me = id(reader)
    hit = _last.source() if _last.source is not None else None
    kept = _last.result() if _last.result is not None else None
    if hit is x and kept is not None and _last.key == key and me not in _last.readers:
        # an inference tensor has no version counter: the transpose is compared with it
        if not x.is_inference() or torch.equal(kept, x.reshape(-1, x.shape[-1]).t()):
            _last.readers = {*_last.readers, me}
            return kept
    result = transposed(x.reshape(-1, x.shape[-1]))
    held = weakref.ref(result) if result.requires_grad else (lambda: result)
    _last.key, _last.source, _last.result, _last.readers = key, weakref.ref(x), held, {me}
    return result


def _blocks_t(x: Tensor) -> Tensor:
    with torch.no_grad():
        return torch.cat(
            [x[k : k + TRANSPOSE_ROWS].t() for k in range(0, x.shape[0], TRANSPOSE_ROWS)], 1
        )


class _Transpose(torch.autograd.Function):
    """:func:`transposed` as one autograd node; its backward transposes by blocks too."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return _blocks_t(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return transposed(grad)


def contiguous_t(x: Tensor) -> Tensor:
    """``x`` as a contiguous tensor, where ``x`` is a transposed view (``x.t()``
    contiguous) transposed by blocks; other tensors as ``x.contiguous()``."""
    if x.dim() == 2 and not x.is_contiguous() and x.t().is_contiguous():
        return transposed(x.t())
    return x.contiguous()
