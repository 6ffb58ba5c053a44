"""The linalg ops a compile builds and reads, without the ``mlir.dialects.linalg``
package: that package runs the OpDSL's named-op definitions when it is imported (50-75
ms of every compile process's start), and MLIR's bindings import it for the first
``op.opview`` of any linalg op. ``linalg.fill`` is built from the op's generated class;
a structured op's inputs are counted from its operand segments and its iterator
types read from the attribute's text (iterating the attribute makes Python objects
of its ``#linalg.iterator_type`` elements, which imports the package too)."""

from __future__ import annotations

import re

from mlir import ir
from mlir.dialects import _linalg_ops_gen as generated


def linalg_fill(value: ir.Value, outs: list[ir.Value]) -> ir.Value:
    """``linalg.fill ins(value) outs(outs[0])``: its tensor result (``value`` has the
    element type of ``outs[0]``, as every caller's does)."""
    (out,) = outs
    op = generated.FillOp([out.type], [value], [out])
    element = ir.ShapedType(out.type).element_type
    block = op.regions[0].blocks.append(value.type, element)
    with ir.InsertionPoint(block):
        generated.YieldOp([block.arguments[0]])
    return op.results[0]


def input_count(op: ir.Operation) -> int:
    """How many of a structured linalg op's (``linalg.generic``'s) operands are inputs:
    its ``operandSegmentSizes``' first entry (``op.opview.inputs`` would import the
    package)."""
    return int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0])


def iterator_types(op: ir.Operation) -> list[str]:
    """A structured linalg op's iterator types, as their names (``"parallel"``,
    ``"reduction"``), in order."""
    return re.findall(r"iterator_type<(\w+)>", str(op.attributes["iterator_types"]))
