"""Flat buffers of encoded tensors and the ``sparse_iter.abi`` description of a function.

An encoded tensor of rank ``R`` crosses a function boundary as its buffers,
in :meth:`sparsecomp.formats.SparseTensor.buffers` order (``pos{l}``,
``crd{l}`` per level, then ``values``; rank-1 tensors of the layout's
widths), followed by ``R`` ``index`` dimension sizes. The JSON written to
``sparse_iter.abi`` (see ``docs/cpu-abi.md``) lets the runtime map
numpy/scipy arguments onto these parameters without MLIR.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.layout import Layout

AnyLayout = Layout | Composable

#: MLIR element type -> numpy dtype name (bf16 has none: a public function with bf16
#: tensors compiles for the module's own callers, uncallable from Python).
_DTYPES = {
    "f16": "float16", "f32": "float32", "f64": "float64",
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "index": "int64",
    "complex<f32>": "complex64", "complex<f64>": "complex128",
}  # fmt: skip


class NoAbiError(SparsecompError, ValueError):
    """A type Python cannot pass (a memref, a vector, an element type without numpy dtype)."""


def dtype_name(ty: ir.Type) -> str:
    name = str(ty)
    if name not in _DTYPES:
        raise NoAbiError(f"element type {ty} has no numpy equivalent")
    return _DTYPES[name]


def abi_or_note(build: Callable[[], str]) -> str:
    """``build()``, or the ABI of a function Python cannot call: ``{"uncallable": why}``.

    A public function whose signature has no Python form (memrefs, vectors,
    ...) still compiles, for the module's own callers; the runtime lists it
    as not callable from Python, with the reason, instead of failing the
    compile.
    """
    try:
        return build()
    except NoAbiError as exc:
        return uncallable(exc.message)


def uncallable(why: str) -> str:
    """The ABI JSON of a public function Python cannot call, and why."""
    return json.dumps({"uncallable": why}, separators=(",", ":"))


def is_uncallable(abi: str) -> bool:
    return json.loads(abi).get("uncallable") is not None


def _int(width: int) -> ir.Type:
    return ir.IntegerType.get_signless(width or 64)


def buffer_types(layout: AnyLayout, element: ir.Type) -> list[tuple[str, ir.Type]]:
    """``(name, rank-1 tensor type)`` of each buffer, in the runtime's order.

    A composable layout lists each part's buffers, named ``part{i}.<name>``
    as :meth:`SparseTensor.buffers` does.
    """
    if isinstance(layout, Composable):
        return [
            (f"part{i}.{name}", ty)
            for i, part in enumerate(layout.parts)
            for name, ty in buffer_types(part.layout, element)
        ]
    dyn = ir.ShapedType.get_dynamic_size()
    out: list[tuple[str, ir.Type]] = []
    for lv, level in enumerate(layout.levels):
        if level.has_positions:
            out.append((f"pos{lv}", ir.RankedTensorType.get([dyn], _int(layout.pos_width))))
        if level.has_coordinates:
            out.append((f"crd{lv}", ir.RankedTensorType.get([dyn], _int(layout.crd_width))))
    out.append(("values", ir.RankedTensorType.get([dyn], element)))
    return out


def flat_types(ty: ir.Type, layout: AnyLayout) -> list[ir.Type]:
    """The parameter types an encoded tensor type becomes: buffers, then dim sizes."""
    tensor = ir.RankedTensorType(ty)
    buffers = [t for _, t in buffer_types(layout, tensor.element_type)]
    return buffers + [ir.IndexType.get()] * tensor.rank


def describe(ty: ir.Type, layout: AnyLayout | None, shape: list[Any]) -> dict[str, Any]:
    """The ABI entry of one argument or result."""
    if not isinstance(ty, ir.RankedTensorType):
        if isinstance(ty, ir.ShapedType):  # memref, vector, unranked tensor
            raise NoAbiError(f"type {ty} has no Python form")
        return {"kind": "scalar", "dtype": dtype_name(ty)}
    tensor = ir.RankedTensorType(ty)
    entry: dict[str, Any] = {
        "kind": "dense" if layout is None else "sparse",
        "dtype": dtype_name(tensor.element_type),
        "shape": shape,
    }
    if layout is not None:
        entry["layout"] = layout.attr_text()
        entry["buffers"] = [
            [name, _host_dtype(layout, name, ir.RankedTensorType(t).element_type)]
            for name, t in buffer_types(layout, tensor.element_type)
        ]
    return entry


def _host_dtype(layout: AnyLayout, name: str, element: ir.Type) -> str:
    """The numpy dtype of a buffer: its element type's, but ``uint32`` for ``mma.sp``
    metadata words (:mod:`sparsecomp.formats.mma_sp`), which the kernel reads as i32."""
    last = f"crd{len(layout.levels) - 1}" if isinstance(layout, Layout) else None
    if isinstance(layout, Layout) and layout.nm_metadata and name == last:
        return "uint32"
    return dtype_name(element)


def static_shape(ty: ir.Type) -> list[Any]:
    if not isinstance(ty, ir.RankedTensorType):
        return []
    return [None if ir.ShapedType(ty).is_dynamic_dim(i) else d for i, d in enumerate(ty.shape)]


def abi_json(
    args: list[dict[str, Any]], results: list[dict[str, Any]], extra: dict[str, Any] | None = None
) -> str:
    return json.dumps({"args": args, "results": results, **(extra or {})}, separators=(",", ":"))
