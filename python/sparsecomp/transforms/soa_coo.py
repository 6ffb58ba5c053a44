"""Pass ``sparse-iter-soa-coo``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.calls import close_over_calls, functions, name_of
from sparsecomp.ir.upstream import (
    is_sparse_tensor_encoding,
    layout_from_sparse_tensor,
    sparse_tensor_text,
)
from sparsecomp.ir.walk import preorder, retype_function
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.wrap_upstream import SIGNATURE_ATTR

#: Ops whose operand or result types spell out the AoS storage (one coordinates
#: buffer for the COO region, strided views of it), that show it (``print``
#: prints each stored buffer, the AoS region as one ``crd``) or hold typed
#: attributes.
_EXPOSING = (
    "sparse_tensor.print",
    "sparse_tensor.assemble",
    "sparse_tensor.disassemble",
    "sparse_tensor.coordinates",
    "sparse_tensor.coordinates_buffer",
    "arith.constant",
)


def _upstream_layout(ty: ir.Type) -> Layout | None:
    if not isinstance(ty, ir.RankedTensorType) or not is_sparse_tensor_encoding(ty.encoding):
        return None
    try:
        return layout_from_sparse_tensor(ty.encoding)
    except FormatError:
        return None


def _sliced_aos(ty: ir.Type) -> bool:
    """Whether ``ty``'s ``#sparse_tensor`` encoding has dimension slices and an AoS
    singleton level: a slice of a COO tensor, which sparsecomp's layouts do not model,
    so it keeps AoS, and so must the tensor it slices (the sparsifier asserts that a
    slice's encoding is its source's, slices aside)."""
    if not isinstance(ty, ir.RankedTensorType) or not is_sparse_tensor_encoding(ty.encoding):
        return False
    text = str(ty.encoding)
    return "slice(" in text and any(
        "soa" not in level for level in re.findall(r"singleton(?:\([^)]*\))?", text)
    )


def to_soa(layout: Layout) -> Layout:
    """``layout`` with its singleton levels stored struct-of-arrays."""
    levels = tuple(
        dataclasses.replace(lv, soa=True) if lv.kind == "singleton" else lv for lv in layout.levels
    )
    return dataclasses.replace(layout, levels=levels)


class Retyper:
    """``#sparse_tensor`` tensor types -> the same with ``change`` applied to their layout."""

    def __init__(self, change: Callable[[Layout], Layout]) -> None:
        self.change = change
        self.cache: dict[str, ir.Type] = {}

    def changes(self, ty: ir.Type) -> bool:
        layout = _upstream_layout(ty)
        return layout is not None and self.change(layout) != layout

    def __call__(self, ty: ir.Type) -> ir.Type:
        if not self.changes(ty):
            return ty
        key = str(ty)
        if key not in self.cache:
            rt = ir.RankedTensorType(ty)
            layout = self.change(layout_from_sparse_tensor(rt.encoding))
            enc = ir.Attribute.parse(sparse_tensor_text(layout), ty.context)
            loc = ir.Location.unknown(ty.context)
            self.cache[key] = ir.RankedTensorType.get(rt.shape, rt.element_type, enc, loc=loc)
        return self.cache[key]

    def function_type(self, attr: ir.Attribute) -> ir.TypeAttr:
        fty = ir.FunctionType(ir.TypeAttr(attr).value)
        new = ir.FunctionType.get([self(t) for t in fty.inputs], [self(t) for t in fty.results])
        return ir.TypeAttr.get(new)

    def _exposes(self, func: ir.Operation) -> str | None:
        """Why ``func`` must keep the types as written, or None."""
        for op in preorder(func):
            values = [*op.operands, *op.results]
            if op.name in _EXPOSING and any(self.changes(v.type) for v in values):
                return f"uses '{op.name}' on such a tensor"
            if any(_sliced_aos(v.type) for v in values):
                return "slices such a tensor (a slice's encoding cannot be retyped)"
        return None

    def run(self, module: ir.Operation) -> None:
        """Retype every function of ``module`` but those exposing the storage (and neighbours)."""
        funcs = functions(module)
        keep = close_over_calls(
            funcs, {name_of(f): why for f in funcs if (why := self._exposes(f)) is not None}
        )
        for func in funcs:
            if name_of(func) in keep:
                continue
            retype_function(func, self)
            if SIGNATURE_ATTR in func.attributes:
                func.attributes[SIGNATURE_ATTR] = self.function_type(
                    func.attributes[SIGNATURE_ATTR]
                )


@dataclasses.dataclass(frozen=True)
class SoaCooPass(SparsecompPass):
    """Store the coordinates of upstream COO tensors struct-of-arrays (singleton(soa)).

    Upstream MLIR stores the coordinates of a COO region (a
    ``compressed(nonunique)`` level followed by ``singleton`` levels) as
    one array of structs unless the singletons say ``soa``. That layout is
    a storage choice, not a value: a function computes the same with
    either. sparsecomp's ABI passes one coordinates array per level (the
    SoA layout), and the sparsifier's vectorizer reads AoS coordinates
    through strided views that ``vector.maskedload`` ignores (see
    ``sparse-iter-strided-vector-access``). So every ``#sparse_tensor``
    type with an AoS singleton level gets ``soa`` on its singleton levels,
    in the signature, the ``sparse_iter.tensor_signature`` the fallback
    records, block arguments and op results: functions with AoS COO
    arguments or results then cross the sparsecomp ABI, with no copy.

    A function keeps its AoS types when it uses an op whose types spell
    out the storage (``sparse_tensor.assemble``, ``disassemble``,
    ``coordinates``, ``coordinates_buffer``) or that prints it
    (``sparse_tensor.print``: the program sees the storage it declared, the
    AoS region as one interleaved ``crd``), or an ``arith.constant`` of
    such a type, or slices a COO tensor (a slice's encoding, with dimension
    slices, cannot be retyped, and must match its source's); so do its
    callers and callees, so that calls keep matching types. Runs on the
    fallback's module before the sparsifier.

    Before:

    ```mlir
    #COO = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>
    func.func @k(%a: tensor<?x?xf32, #COO>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32>
    ```

    After:

    ```mlir
    #COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique),
                                     d1 : singleton(soa)) }>
    func.func @k(%a: tensor<?x?xf32, #COO>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32>
    ```
    """

    NAME = "sparse-iter-soa-coo"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        Retyper(to_soa).run(op)
