"""The layout conversions of a module after layout specialization, as :class:`Conversion`s."""

from __future__ import annotations

from mlir import ir

from sparsecomp.ir.attrs import encoding_of
from sparsecomp.ir.parsing import location_text
from sparsecomp.lowering.abi import NoAbiError, dtype_name
from sparsecomp.runtime.plan import DENSE, Conversion

#: The ops that convert: to an encoding, and back to a dense tensor.
CONVERSIONS = ("sparse_iter.set_encoding", "sparse_iter.unset_encoding")


def _side(ty: ir.Type) -> str:
    encoding = encoding_of(ty)
    return DENSE if encoding is None else str(encoding)


def find_conversions(module: ir.Operation, filename: str) -> list[tuple[ir.Location, Conversion]]:
    """Every ``sparse_iter.set_encoding`` / ``unset_encoding`` in ``module``, in program
    order, with its location.

    Conversions whose element type has no numpy name (only in functions
    Python never sees) are listed with the MLIR type's name.
    """
    found: list[tuple[ir.Location, Conversion]] = []
    function = ""

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal function
        if op.name == "func.func":
            function = ir.StringAttr(op.attributes["sym_name"]).value
        elif op.name in CONVERSIONS:
            source, dest = op.operands[0].type, op.results[0].type
            rt = ir.RankedTensorType(dest)
            try:
                dtype = dtype_name(rt.element_type)
            except NoAbiError:
                dtype = str(rt.element_type)
            shape = tuple(None if ir.ShapedType.is_dynamic_size(s) else s for s in rt.shape)
            where = location_text(op.location, filename)
            conversion = Conversion(function, where, _side(source), _side(dest), dtype, shape)
            found.append((op.location, conversion))
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
