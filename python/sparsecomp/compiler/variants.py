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

import dataclasses
from collections.abc import Mapping, Sequence

from mlir import ir
from mlir.dialects import bufferization, tensor

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.names import parse_layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.calls import callees, close_over_calls, functions, name_of, reachable
from sparsecomp.ir.context import make_context
from sparsecomp.ir.destinations import DESTINATIONS, returns
from sparsecomp.ir.parsing import parse_module
from sparsecomp.ir.upstream import (
    is_sparse_tensor_encoding,
    layout_from_sparse_tensor,
    sparse_tensor_text,
)
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.decompose_formats import DECOMPOSE
from sparsecomp.transforms.guard_coordinates import GUARD


def with_layouts(
    text: str,
    function: str,
    rules: Mapping[int, str],
    source: str = "<variant>",
) -> str:
    """``text`` with each rule of ``rules`` (argument position -> a
    ``#sparse_iter.layout<...>`` or ``#sparse_iter.composable<...>``) on that
    argument of ``function``. ``source``: the file name of ``text``'s own
    locations (each ``with_*`` takes it).

    A function that uses ``sparse_tensor`` ops, or calls or is called by one
    that does, goes to the upstream sparsifier, which takes no
    ``#sparse_iter`` layout: where its rules only change index widths, its
    ``#sparse_tensor.encoding`` types take those widths instead (every value
    of such a type in the functions connected to it by calls, so that calls
    keep agreeing types). So do the types (of either syntax) of a function
    with callers or callees on sparse_iter's road, where a rule would retype
    the function's values but not its callee's arguments."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, source, ctx)
        func = _function(module, function)
        road = _upstream_road(module.operation, function) or _called(module.operation, function)
        if road and (types := _width_types(func, rules)):
            for other in road:
                _retype(other, types)
            return module.operation.get_asm(enable_debug_info=True)
        if road:  # a rule retypes the function and what it calls: others must not call those
            _keep_reachable(module.operation, function)
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


def _keep_reachable(module: ir.Operation, function: str) -> None:
    """Erase the functions ``function`` does not reach by calls: a variant serves that
    one function, and another public function calling the same private helper (the
    multi-device guide's ``on_wide`` and ``on_narrow``) kept the helper from being
    retyped with it ("'func.call' op operand type mismatch")."""
    funcs = {name_of(f): f for f in functions(module)}
    kept = reachable({n: callees(f) for n, f in funcs.items()}, function) | {function}
    for name, func in funcs.items():
        if name not in kept:
            func.erase()


def _upstream_road(module: ir.Operation, function: str) -> list[ir.Operation]:
    """The functions that go to the upstream sparsifier with ``function`` (those
    connected to it by calls, one of which uses ``sparse_tensor`` ops), or []."""
    funcs = functions(module)
    marked = {name_of(f): "uses sparse_tensor ops" for f in funcs if _has_sparse_tensor_ops(f)}
    reached = close_over_calls(funcs, marked)
    if function not in reached:
        return []
    together = close_over_calls(funcs, {function: ""})
    return [f for f in funcs if name_of(f) in together]


def _called(module: ir.Operation, function: str) -> list[ir.Operation]:
    """``function`` and the functions connected to it by calls, where there are any
    (a decomposition rule retypes one function's values: a callee taking the argument
    would no longer match), else []."""
    funcs = functions(module)
    together = close_over_calls(funcs, {function: ""})
    return [f for f in funcs if name_of(f) in together] if len(together) > 1 else []


def _has_sparse_tensor_ops(func: ir.Operation) -> bool:
    """Whether ``func`` uses ``sparse_tensor`` ops: it then takes the upstream
    sparsifier's road, where ``#sparse_iter`` layouts cannot go."""
    return any(op.name.startswith("sparse_tensor.") for op in preorder(func))


def _width_types(func: ir.Operation, rules: Mapping[int, str]) -> dict[ir.Type, ir.Type]:
    """``old type -> new type`` when every rule only changes the index widths of an
    argument's ``#sparse_tensor.encoding`` or ``#sparse_iter.layout`` (a width variant
    of a function on the upstream road or with callers or callees: the encoding keeps
    its dialect); empty when any rule does more."""
    arguments = func.regions[0].blocks[0].arguments
    types: dict[ir.Type, ir.Type] = {}
    for argument, attr in rules.items():
        ty = arguments[argument].type
        encoding = ir.RankedTensorType(ty).encoding if isinstance(ty, ir.RankedTensorType) else None
        upstream = is_sparse_tensor_encoding(encoding)
        try:
            own = layout_from_sparse_tensor(encoding) if upstream else layout_of(ty)
            wanted = parse_layout(attr)
            if (
                not isinstance(own, Layout)
                or not isinstance(wanted, Layout)
                or dataclasses.replace(own, pos_width=wanted.pos_width, crd_width=wanted.crd_width)
                != wanted
            ):
                return {}
            text = sparse_tensor_text(wanted) if upstream else wanted.attr_text()
            new = ir.Attribute.parse(text)
        except (SparsecompError, ValueError):
            return {}
        tensor_ty = ir.RankedTensorType(ty)
        retyped = ir.RankedTensorType.get(tensor_ty.shape, tensor_ty.element_type, new)
        if types.setdefault(ty, retyped) != retyped:
            return {}  # one type, two widths: values of that type could not follow both
    return types


def _retype(func: ir.Operation, types: Mapping[ir.Type, ir.Type]) -> None:
    """Every value of ``func`` whose type is a key of ``types`` takes the type it maps to."""

    def retype(value: ir.Value) -> None:
        new = types.get(value.type)
        if new is not None:
            value.set_type(new)

    def visit(op: ir.Operation) -> ir.WalkResult:
        for region in op.regions:
            for block in region.blocks:
                for argument in block.arguments:
                    retype(argument)
        for result in op.results:
            retype(result)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(
            [types.get(t, t) for t in fty.inputs], [types.get(t, t) for t in fty.results]
        )
    )


def with_guards(
    text: str,
    function: str,
    arguments: Sequence[int],
    source: str = "<variant>",
) -> str:
    """``text`` with ``function``'s sparse ``arguments`` guarded: its kernel checks each
    coordinate of theirs as it reads it and reports through a status word
    (``sparse_iter.guard``, pass ``sparse-iter-guard-coordinates``)."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, source, ctx)
        func = _function(module, function)
        func.attributes[GUARD] = ir.DenseI64ArrayAttr.get(sorted(arguments))
        return module.operation.get_asm(enable_debug_info=True)


def with_destinations(
    text: str,
    function: str,
    into: Mapping[int, int | None],
    source: str = "<variant>",
) -> str:
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
        module = parse_module(text, source, ctx)
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


def with_static_sizes(
    text: str,
    function: str,
    sizes: Mapping[int, Mapping[int, int]],
    source: str = "<variant>",
) -> str:
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
        module = parse_module(text, source, ctx)
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
    """Whether ``op`` takes its ``operand``-th operand with any static sizes as an input.

    Not a linalg op with a sparse ``outs`` of dynamic sizes: a loop sized statically
    by the input and dynamically by the output is "unexpected conversion mismatch" to
    MLIR's sparsifier (an SpMM into CSR had no variant for its static ``K``)."""
    if op.name in _SHAPE_AGNOSTIC:
        return operand == 0
    if op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        ins = next(iter(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])))
        outs = [ir.RankedTensorType(v.type) for v in list(op.operands)[ins:]
                if isinstance(v.type, ir.RankedTensorType)]  # fmt: skip
        sparse = any(t.encoding is not None and not t.has_static_shape for t in outs)
        return operand < ins and not sparse
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
