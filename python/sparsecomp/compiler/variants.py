"""A program's variants: sparse arguments in other layouts, dense sizes made static.

``Executable.prepare`` asks for one (a layout chosen for a matrix), and so
does a call whose operands have other index widths than the kernel's
(:mod:`sparsecomp.runtime.specialize`); :func:`with_static_sizes` makes the
dense sizes of a call static (SpMM's ``K``). A layout variant is the same
module with a decomposition rule on each such argument
(``sparse_iter.decompose``, applied by ``sparse-iter-decompose-formats`` in
the first stage): the argument, and every value of the function with its
type (an output that shares its encoding, as SDDMM's does), take the
layout. The compile cache then keeps it like any program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mlir import ir
from mlir.dialects import bufferization, tensor

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.destinations import DESTINATIONS, returns
from sparsecomp.ir.parsing import parse_module
from sparsecomp.transforms.decompose_formats import DECOMPOSE
from sparsecomp.transforms.guard_coordinates import GUARD


def with_layouts(text: str, function: str, rules: Mapping[int, str]) -> str:
    """``text`` with each rule of ``rules`` (argument position -> a
    ``#sparse_iter.layout<...>`` or ``#sparse_iter.composable<...>``) on that
    argument of ``function``."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, "<variant>", ctx)
        func = _function(module, function)
        count = len(func.regions[0].blocks[0].arguments)
        if "arg_attrs" in func.attributes:
            arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
        else:
            arg_attrs = [ir.DictAttr.get({}) for _ in range(count)]
        for argument, attr in rules.items():
            entries = {n.name: n.attr for n in ir.DictAttr(arg_attrs[argument])}
            entries[DECOMPOSE] = ir.Attribute.parse(attr)
            arg_attrs[argument] = ir.DictAttr.get(entries)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
        return module.operation.get_asm(enable_debug_info=True)


def with_guards(text: str, function: str, arguments: Sequence[int]) -> str:
    """``text`` with ``function``'s sparse ``arguments`` guarded: its kernel checks each
    coordinate of theirs as it reads it and reports through a status word
    (``sparse_iter.guard``, pass ``sparse-iter-guard-coordinates``)."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, "<variant>", ctx)
        func = _function(module, function)
        func.attributes[GUARD] = ir.DenseI64ArrayAttr.get(sorted(arguments))
        return module.operation.get_asm(enable_debug_info=True)


def with_destinations(text: str, function: str, into: Mapping[int, int | None]) -> str:
    """``text`` with ``function``'s results written into arrays the caller passes.

    ``into`` maps a result to the argument that receives it: an existing dense
    argument of the result's type (``out=`` naming that very array), or None for
    a new argument appended after the others (in result order). Each such
    result is materialized in its argument before the return
    (``bufferization.materialize_in_destination``) and the function says so in
    ``sparse_iter.destinations``; ``sparse-iter-destinations`` then builds it
    there and ``sparse-iter-drop-destination-results`` drops it from the
    signature.
    """
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, "<variant>", ctx)
        func = _function(module, function)
        block = func.regions[0].blocks[0]
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        inputs, results = list(fty.inputs), list(fty.results)
        chosen = [-1] * len(results)
        for r in sorted(into):
            number = into[r]
            if not 0 <= r < len(results) or not isinstance(results[r], ir.RankedTensorType):
                raise SparsecompError(f"'{function}' has no tensor result {r}")
            if number is None:
                number = len(inputs)
                block.add_argument(results[r], func.location)
                inputs.append(results[r])
            elif inputs[number] != results[r]:
                raise SparsecompError(
                    f"argument {number} of '{function}' ({inputs[number]}) cannot receive "
                    f"result {r} ({results[r]})"
                )
            chosen[r] = number
        if "arg_attrs" in func.attributes:
            attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
            attrs += [ir.DictAttr.get({})] * (len(inputs) - len(attrs))
            func.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
        for ret in returns(func):
            with ir.InsertionPoint(ret), ret.location:
                for r, number in enumerate(chosen):
                    if number >= 0:
                        value = ret.operands[r]
                        dest = block.arguments[number]
                        ret.operands[r] = bufferization.MaterializeInDestinationOp(
                            value.type, value, dest
                        ).result
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
        func.attributes[DESTINATIONS] = ir.DenseI64ArrayAttr.get(chosen)
        return module.operation.get_asm(enable_debug_info=True)


#: Ops that read any shape of a dense argument: the static type can go to them as it is.
_SHAPE_AGNOSTIC = ("tensor.dim", "tensor.extract", "vector.transfer_read")


def with_static_sizes(text: str, function: str, sizes: Mapping[int, Mapping[int, int]]) -> str:
    """``text`` with ``function``'s dense arguments given static sizes: ``sizes`` maps an
    argument to ``{dimension: size}``. Calls must pass exactly those sizes (the
    signature says so, and the runtime checks it).

    The argument takes the static type, and so do the ops that read it as an input
    (``ins`` of linalg ops, ``tensor.dim``, element reads); other uses (an ``outs``
    operand, a return) read a ``tensor.cast`` back to the declared type. Stage II
    then sizes vector loops from the static input: no masks, exact vector counts.
    """
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, "<variant>", ctx)
        func = _function(module, function)
        block = func.regions[0].blocks[0]
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        inputs = list(fty.inputs)
        for argument, dims in sizes.items():
            arg = block.arguments[argument]
            old = ir.RankedTensorType(arg.type)
            shape = [dims.get(d, old.shape[d]) for d in range(old.rank)]
            new = ir.RankedTensorType.get(shape, old.element_type, old.encoding)
            uses = [(u.owner, u.operand_number) for u in arg.uses]
            arg.set_type(new)
            inputs[argument] = new
            others = [(op, n) for op, n in uses if not _reads_any_shape(op, n)]
            if others:
                with ir.InsertionPoint.at_block_begin(block), arg.location:
                    back = tensor.CastOp(old, arg).result
                for op, n in others:
                    op.operands[n] = back
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(inputs, list(fty.results))
        )
        return module.operation.get_asm(enable_debug_info=True)


def _reads_any_shape(op: ir.Operation, operand: int) -> bool:
    """Whether ``op`` takes its ``operand``-th operand with any static sizes as an input."""
    if op.name in _SHAPE_AGNOSTIC:
        return operand == 0
    if op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        ins = next(iter(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])))
        return operand < ins
    return False


def _function(module: ir.Module, function: str) -> ir.Operation:
    funcs = [
        o.operation
        for o in module.body.operations
        if o.operation.name == "func.func"
        and ir.StringAttr(o.operation.attributes["sym_name"]).value == function
    ]
    if not funcs:
        raise SparsecompError(f"no function '{function}' in the program")
    return funcs[0]
