"""The flattened C results of a call -> numpy arrays, scalars and SparseTensors.

A call's results arrive as one flat tuple of values (the result struct read
with one ``struct.unpack_from``: descriptors as int64 words, scalars as
numbers). Each result memref is one of:

* an alias of an argument buffer (its allocated pointer is the data pointer
  of an array passed in): that array itself when the descriptor covers it
  exactly, else a view whose ``base`` is that array;
* a constant of the kernel library (``memref.get_global``; allocated
  pointer ``0xdeadbeef``): copied;
* memory the kernel ``malloc``-ed: a view owned by a
  :class:`~sparsecomp.runtime.memref.Malloced`, freed once when the last
  view dies. Results sharing one allocation share one owner.

Sparse results are rebuilt from their buffers without re-validation: the
kernel is trusted to produce well-formed storage.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsecomp.errors import FormatError, SparsecompError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.names import AnyLayout
from sparsecomp.formats.storage import Storage
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.memref import GLOBAL_MARKER, Malloced, array_from_words, descriptor_words
from sparsecomp.runtime.overflow import check_result

#: data pointer -> the argument array there (first one wins), for aliasing results.
Inputs = dict[int, np.ndarray]


def unflatten(sig: Signature, values: tuple[Any, ...], inputs: Inputs) -> Any:
    """The Python results of one call from its flat result values: one object or a tuple."""
    owners: dict[int, Malloced] = {}
    out = []
    at = 0
    for n, spec in enumerate(sig.results):
        result, at = _result(spec, values, at, inputs, owners)
        if spec.kind == "sparse":  # narrow index buffers may have wrapped
            check_result(result, f"{sig.name}: result {n}")
        out.append(result)
    return out[0] if len(out) == 1 else tuple(out)


def scalar(spec: ArgSpec, value: Any) -> np.generic:
    """A numpy scalar of the result dtype (bool from bit 0, float16 from its bits)."""
    if spec.dtype == np.bool_:
        return np.bool_(int(value) & 1)
    if spec.dtype == np.float16:
        return np.uint16(value).view(np.float16)
    return spec.dtype.type(value)


def _result(
    spec: ArgSpec, values: tuple[Any, ...], at: int, inputs: Inputs, owners: dict[int, Malloced]
) -> tuple[Any, int]:
    """The result starting at ``values[at]``, and where the next one starts."""
    if spec.kind == "scalar":
        return scalar(spec, values[at]), at + 1
    if spec.kind == "dense":
        end = at + descriptor_words(spec.rank)
        return result_array(values[at:end], spec.rank, spec.dtype, inputs, owners), end
    named = {}
    shared = False  # a buffer aliases an argument's array: not ours to make read-only
    for name, dtype in spec.buffers:
        named[name] = result_array(values[at : at + 5], 1, dtype, inputs, owners)
        shared = shared or (values[at] or 0) in inputs
        at += 5
    shape = tuple(values[at : at + spec.rank])
    assert spec.layout is not None
    tensor = trusted_tensor(shape, spec.layout, spec.dtype, named, shared)
    if spec.declared_layout is not None:  # computed unblocked by the upstream sparsifier
        try:
            tensor = tensor.to(spec.declared_layout)
        except FormatError as exc:
            why = f"the result does not fit its declared layout: {exc.message}"
            raise FormatError(why) from None
    return tensor, at + spec.rank


def result_array(
    words: tuple[int, ...],
    rank: int,
    dtype: np.dtype[Any],
    inputs: Inputs,
    owners: dict[int, Malloced],
) -> np.ndarray:
    """The numpy array for one result descriptor (alias, copied constant, or owned)."""
    address = words[0] or 0
    base = inputs.get(address)
    if base is not None:
        view = array_from_words(words, rank, dtype, base)
        return base if _same(view, base, words[1] + words[2] * dtype.itemsize == address) else view
    if address == GLOBAL_MARKER:
        return array_from_words(words, rank, dtype, None).copy()
    shape = words[3 : 3 + rank]
    if address == 0 and 0 not in shape:
        raise SparsecompError(f"the kernel returned a NULL buffer of shape {shape}")
    owner = owners.get(address)
    if owner is None:
        owner = owners[address] = Malloced(address)
    return array_from_words(words, rank, dtype, owner)


def _same(view: np.ndarray, base: np.ndarray, same_start: bool) -> bool:
    return (
        same_start
        and view.shape == base.shape
        and view.strides == base.strides
        and view.dtype == base.dtype
    )


def trusted_tensor(
    shape: tuple[int, ...],
    layout: AnyLayout,
    dtype: np.dtype[Any],
    named: dict[str, np.ndarray],
    shared: bool = False,
) -> SparseTensor:
    """A :class:`SparseTensor` over kernel-produced buffers, named as in ``buffers()``.

    No validation beyond the buffer names: the storage came from compiled
    code. ``shared``: some buffer is an argument's array (the tensor is
    ``shared`` and its index buffers are left writable).
    """
    if isinstance(layout, Composable):
        parts = tuple(
            trusted_tensor(shape, part.layout, dtype, _prefixed(named, f"part{i}."), shared)
            for i, part in enumerate(layout.parts)
        )
        _check_used(named, [f"part{i}.{n}" for i, p in enumerate(parts) for n, _ in p.buffers()])
        return SparseTensor(shape, layout, dtype, None, parts)
    levels = range(layout.n_levels)
    positions = tuple(named.get(f"pos{lvl}") for lvl in levels)
    coordinates = tuple(named.get(f"crd{lvl}") for lvl in levels)
    if "values" not in named:
        raise SparsecompError(f"a sparse result has no values buffer, only {sorted(named)}")
    storage = Storage(positions, coordinates, named["values"])
    tensor = SparseTensor(shape, layout, dtype, storage, shared=shared, checked=True)
    _check_used(named, [n for n, _ in tensor.buffers()])
    return tensor


def _prefixed(named: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k.removeprefix(prefix): v for k, v in named.items() if k.startswith(prefix)}


def _check_used(named: dict[str, np.ndarray], used: list[str]) -> None:
    extra = sorted(set(named) - set(used))
    if extra:
        raise SparsecompError(f"a sparse result has buffers its layout does not use: {extra}")
