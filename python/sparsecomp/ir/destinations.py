"""Results a function writes into arrays its caller passes (``sparse_iter.destinations``).

A variant of a public function for calls with ``out=``
(:func:`sparsecomp.compiler.variants.with_destinations`) says, per result, which
argument receives it; passes ``sparse-iter-destinations`` and
``sparse-iter-drop-destination-results`` build it there, and stage II lowering
accumulates into such an argument in place (:mod:`sparsecomp.lowering.nest`).
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.ir.calls import functions

#: func attribute: per result, the argument it is written into (-1: returned as usual)
DESTINATIONS = "sparse_iter.destinations"
MATERIALIZE = "bufferization.materialize_in_destination"


def destinations(func: ir.Operation) -> list[int]:
    """Per result of ``func``, the argument that receives it (-1: none)."""
    if DESTINATIONS not in func.attributes:
        return []
    return list(ir.DenseI64ArrayAttr(func.attributes[DESTINATIONS]))


def is_destination(value: ir.Value) -> bool:
    """Whether ``value`` is (a ``tensor.cast`` of) an argument of a function that writes a
    result into it (a static-size variant casts its arguments back for outs operands)."""
    while not isinstance(value, ir.BlockArgument) and value.owner.name == "tensor.cast":
        value = value.owner.operands[0]
    if not isinstance(value, ir.BlockArgument):
        return False
    arg = ir.BlockArgument(value)
    parent = arg.owner.owner
    parent = getattr(parent, "operation", parent)
    return parent.name == "func.func" and arg.arg_number in destinations(parent)


def returns(func: ir.Operation) -> list[ir.Operation]:
    """The ``func.return`` ops of ``func``."""
    return [
        op.operation
        for block in func.regions[0].blocks
        for op in block.operations
        if op.operation.name == "func.return"
    ]


def marked(module: ir.Operation) -> list[ir.Operation]:
    """The functions of ``module`` that write results into arguments."""
    return [func for func in functions(module) if DESTINATIONS in func.attributes]
