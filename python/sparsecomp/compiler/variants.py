"""A program's variant with one sparse argument in another layout (``Executable.prepare``).

The variant is the same module in which every value of the function that
has the argument's tensor type (the argument itself, and an output that
shares its encoding, as SDDMM's does) takes the new layout's encoding; the
rest of the pipeline then compiles it like any program, and the compile
cache keeps it.
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import parse_module


def _values(func: ir.Operation) -> list[ir.Value]:
    found: list[ir.Value] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        for region in op.regions:
            for block in region.blocks:
                found.extend(block.arguments)
        found.extend(op.results)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return found


def with_layout(text: str, function: str, argument: int, attr: str) -> str:
    """``text`` with ``function``'s ``argument``-th argument (and the values of its type)
    encoded by ``attr`` (``#sparse_iter.layout<...>`` or ``#sparse_iter.composable<...>``)."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, "<variant>", ctx)
        funcs = [
            o.operation
            for o in module.body.operations
            if o.operation.name == "func.func"
            and ir.StringAttr(o.operation.attributes["sym_name"]).value == function
        ]
        if not funcs:
            raise SparsecompError(f"no function '{function}' in the program")
        func = funcs[0]
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        old = fty.inputs[argument]
        if sum(1 for t in fty.inputs if t == old) != 1:
            raise SparsecompError(
                f"'{function}' has several arguments of type {old}: prepare() cannot tell "
                "which one to lay out differently",
                hint="give each sparse argument an encoding of its own",
            )
        tensor = ir.RankedTensorType(old)
        new = ir.RankedTensorType.get(tensor.shape, tensor.element_type, ir.Attribute.parse(attr))
        for value in _values(func):
            if value.type == old:
                value.set_type(new)
        inputs = [new if t == old else t for t in fty.inputs]
        results = [new if t == old else t for t in fty.results]
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
        if not module.operation.verify():
            raise SparsecompError(f"'{function}' with its argument {argument} as {attr} is invalid")
        return module.operation.get_asm(enable_debug_info=True)
