"""Pass ``sparse-iter-import-sparse-tensor``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import FormatError
from sparsecomp.ir.calls import close_over_calls, functions, name_of
from sparsecomp.ir.upstream import is_sparse_tensor_encoding, layout_from_sparse_tensor
from sparsecomp.ir.verify import types_of
from sparsecomp.ir.walk import preorder, retype_function
from sparsecomp.transforms.base import SparsecompPass

_DEALLOC = "bufferization.dealloc_tensor"
#: Discardable attribute on functions left with upstream encodings: why.
UPSTREAM_ATTR = "sparse_iter.upstream"


def _upstream_encoding(ty: ir.Type) -> ir.Attribute | None:
    if isinstance(ty, ir.RankedTensorType) and is_sparse_tensor_encoding(ty.encoding):
        return ty.encoding
    return None


def _reason_to_keep(func: ir.Operation) -> str | None:
    """Why ``func`` must keep its ``#sparse_tensor`` encodings, or None."""
    for op in preorder(func):
        if op.name.startswith("sparse_tensor."):
            return f"uses '{op.name}', which sparse_iter has no counterpart for"
        for ty in types_of(op):
            enc = _upstream_encoding(ty)
            if enc is None:
                continue
            try:
                layout_from_sparse_tensor(enc)
            except FormatError as e:
                return f"has the encoding {enc}, which cannot be imported: {e.message}"
    return None


def _kept_functions(funcs: list[ir.Operation]) -> dict[str, str]:
    """Function name -> reason, closed over call edges so that calls keep agreeing types."""
    reasons = {name_of(f): r for f in funcs if (r := _reason_to_keep(f)) is not None}
    return close_over_calls(funcs, reasons)


class _TypeConverter:
    def __init__(self, ctx: ir.Context) -> None:
        self.ctx = ctx
        self.loc = ir.Location.unknown(ctx)
        self.cache: dict[str, ir.Type] = {}

    def __call__(self, ty: ir.Type) -> ir.Type:
        enc = _upstream_encoding(ty)
        if enc is None:
            return ty
        key = str(ty)
        if key not in self.cache:
            layout = ir.Attribute.parse(layout_from_sparse_tensor(enc).attr_text(), self.ctx)
            rt = ir.RankedTensorType(ty)
            self.cache[key] = ir.RankedTensorType.get(
                rt.shape, rt.element_type, layout, loc=self.loc
            )
        return self.cache[key]

    def rewrite(self, func: ir.Operation) -> None:
        self.loc = func.location
        retype_function(func, self)


@dataclasses.dataclass(frozen=True)
class ImportSparseTensorPass(SparsecompPass):
    """Rewrite upstream #sparse_tensor.encoding types to #sparse_iter layouts.

    Every tensor type in a function whose encoding is an upstream
    ``#sparse_tensor.encoding`` gets the equivalent ``#sparse_iter.layout``
    (level formats, properties, the dimension-to-level map including
    ``floordiv``/``mod`` blocks, and bit widths carry over; see
    ``sparsecomp.ir.upstream``), in the function signature, block arguments
    and op results alike.

    A function is left as it is, and marked with
    ``sparse_iter.upstream = "<reason>"``, when it uses an op of the
    ``sparse_tensor`` dialect (which verifies against upstream encodings and
    has no sparse_iter counterpart yet), or an encoding with no sparse_iter
    form (dimension slices, explicit/implicit values). Functions that call
    such a function, or are called by it, are left too, so calls keep
    matching types. The CPU pipeline compiles marked functions through the
    upstream sparsifier. With ``allow-upstream=false`` such functions are an
    error instead.

    In the functions it imports, a ``bufferization.dealloc_tensor`` of a sparse
    tensor is erased: sparse_iter's lowering owns those buffers and frees them
    (the op, in nearly every upstream integration test, stopped the lowering,
    and kept a ``tensor.empty`` it alone used alive), and no use may follow it.

    Before:

    ```mlir
    #CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
    func.func @f(%a: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR>
    ```

    After:

    ```mlir
    func.func @f(%a: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) ->
        (d0 : dense, d1 : compressed)}>>) -> ...
    ```
    """

    NAME = "sparse-iter-import-sparse-tensor"
    allow_upstream: bool = True

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = functions(op)
        kept = _kept_functions(funcs)
        convert = _TypeConverter(op.context)
        for func in funcs:
            name = name_of(func)
            if name not in kept:
                convert.rewrite(func)
                for dealloc in [o for o in preorder(func) if o.name == _DEALLOC]:
                    if isinstance(t := dealloc.operands[0].type, ir.RankedTensorType) and (
                        t.encoding is not None
                    ):
                        dealloc.erase()
            elif not self.allow_upstream:
                func.location.emit_error(f"cannot import '{name}': it {kept[name]}")
                pass_.signal_pass_failure()
            elif any(_upstream_encoding(t) for o in preorder(func) for t in types_of(o)):
                func.attributes[UPSTREAM_ATTR] = ir.StringAttr.get(kept[name])
