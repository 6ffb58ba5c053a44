"""The flattened C results of a call -> numpy arrays, scalars and SparseTensors.

Each result memref is one of:

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

import ctypes
from collections.abc import Iterator
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.names import AnyLayout
from sparsecomp.formats.storage import Storage
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.marshal import Frame
from sparsecomp.runtime.memref import GLOBAL_MARKER, Malloced, array_over, pointer, shape_of


def unflatten(sig: Signature, returned: Any, struct: ctypes.Structure | None, frame: Frame) -> Any:
    """The Python results of one call: ``None``, one object, or a tuple."""
    if not sig.results:
        return None
    if struct is None:
        return scalar(sig.results[0], returned)
    fields = iter([getattr(struct, f[0]) for f in struct._fields_])
    owners: dict[int, Malloced] = {}
    out = [_result(spec, fields, frame, owners) for spec in sig.results]
    return out[0] if len(out) == 1 else tuple(out)


def scalar(spec: ArgSpec, value: Any) -> np.generic:
    """A numpy scalar of the result dtype (bool from bit 0, float16 from its bits)."""
    if spec.dtype == np.bool_:
        return np.bool_(int(value) & 1)
    if spec.dtype == np.float16:
        return np.uint16(value).view(np.float16)
    return spec.dtype.type(value)


def _result(spec: ArgSpec, fields: Iterator[Any], frame: Frame, owners: dict[int, Malloced]) -> Any:
    if spec.kind == "scalar":
        return scalar(spec, next(fields))
    if spec.kind == "dense":
        return result_array(next(fields), spec.rank, spec.dtype, frame, owners)
    named = {n: result_array(next(fields), 1, dt, frame, owners) for n, dt in spec.buffers}
    shape = tuple(int(next(fields)) for _ in range(spec.rank))
    assert spec.layout is not None
    return trusted_tensor(shape, spec.layout, spec.dtype, named)


def result_array(
    desc: ctypes.Structure,
    rank: int,
    dtype: np.dtype[Any],
    frame: Frame,
    owners: dict[int, Malloced],
) -> np.ndarray:
    """The numpy array for one result descriptor (alias, copied constant, or owned)."""
    address = pointer(desc)
    if address in frame.inputs:
        base = frame.inputs[address]
        view = array_over(desc, rank, dtype, base)
        return base if _same(view, base) else view
    if address == GLOBAL_MARKER:
        return array_over(desc, rank, dtype, None).copy()
    if address == 0 and 0 not in shape_of(desc, rank):
        raise SparsecompError(f"the kernel returned a NULL buffer of shape {shape_of(desc, rank)}")
    if address not in owners:
        owners[address] = Malloced(address)
    return array_over(desc, rank, dtype, owners[address])


def _same(view: np.ndarray, base: np.ndarray) -> bool:
    return (
        view.ctypes.data == base.ctypes.data
        and view.shape == base.shape
        and view.strides == base.strides
        and view.dtype == base.dtype
    )


def trusted_tensor(
    shape: tuple[int, ...], layout: AnyLayout, dtype: np.dtype[Any], named: dict[str, np.ndarray]
) -> SparseTensor:
    """A :class:`SparseTensor` over kernel-produced buffers, named as in ``buffers()``.

    No validation beyond the buffer names: the storage came from compiled code.
    """
    if isinstance(layout, Composable):
        parts = tuple(
            trusted_tensor(shape, part.layout, dtype, _prefixed(named, f"part{i}."))
            for i, part in enumerate(layout.parts)
        )
        _check_used(named, [f"part{i}.{n}" for i, p in enumerate(parts) for n, _ in p.buffers()])
        return SparseTensor(shape, layout, dtype, None, parts)
    levels = range(layout.n_levels)
    positions = tuple(named.get(f"pos{lvl}") for lvl in levels)
    coordinates = tuple(named.get(f"crd{lvl}") for lvl in levels)
    if "values" not in named:
        raise SparsecompError(f"a sparse result has no values buffer, only {sorted(named)}")
    tensor = SparseTensor(shape, layout, dtype, Storage(positions, coordinates, named["values"]))
    _check_used(named, [n for n, _ in tensor.buffers()])
    return tensor


def _prefixed(named: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k.removeprefix(prefix): v for k, v in named.items() if k.startswith(prefix)}


def _check_used(named: dict[str, np.ndarray], used: list[str]) -> None:
    extra = sorted(set(named) - set(used))
    if extra:
        raise SparsecompError(f"a sparse result has buffers its layout does not use: {extra}")
