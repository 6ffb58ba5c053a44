"""Collecting ops in pre-order, so passes can rewrite them after the walk; where a value
is defined; retyping a function; rebuilding an op with other operands or results."""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir


def preorder(root: ir.Operation) -> list[ir.Operation]:
    """``root`` and every op nested in it, parents before children.

    The list is taken before any change, so callers may erase or replace ops
    while iterating it (the walk itself must not see a changing IR).
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def defined_within(value: ir.Value, op: ir.Operation) -> bool:
    """Whether ``value`` is defined inside ``op``: a result of an op nested in it, or an
    argument of a block of its regions (``op``'s own results are not)."""
    owner = value.owner
    at = owner.owner if isinstance(owner, ir.Block) else owner.operation.parent
    while at is not None:
        if at == op:
            return True
        at = at.parent
    return False


def retype_function(
    func: ir.Operation, convert: Callable[[ir.Type], ir.Type]
) -> list[ir.Operation]:
    """Give every value in ``func`` (and its signature) the type ``convert`` maps it to.

    Op results and block arguments of every region change in place; types
    ``convert`` returns unchanged stay. Returns the pre-order op list walked.
    """
    ops = preorder(func)
    for op in ops:
        for result in op.results:
            result.set_type(convert(result.type))
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    arg.set_type(convert(arg.type))
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    new = ir.FunctionType.get([convert(t) for t in fty.inputs], [convert(t) for t in fty.results])
    func.attributes["function_type"] = ir.TypeAttr.get(new)
    return ops


def rebuild(
    op: ir.Operation,
    operands: list[ir.Value],
    result_types: list[ir.Type],
    attributes: dict[str, ir.Attribute] | None = None,
) -> ir.Operation:
    """``op`` made again in its place with ``operands``, ``result_types`` and
    ``attributes`` (default: its own), its regions moved over as they are; uses of
    its results go to the new op's first results; ``op`` is erased."""
    new = ir.Operation.create(
        op.name,
        results=result_types,
        operands=operands,
        attributes=attributes or {name: op.attributes[name] for name in op.attributes},
        regions=len(op.regions),
        loc=op.location,
        ip=ir.InsertionPoint(op),
    )
    for old, region in zip(op.regions, new.regions, strict=True):
        for block in list(old.blocks):
            block.append_to(region)
    for old_result, new_result in zip(op.results, new.results, strict=False):
        old_result.replace_all_uses_with(new_result)
    op.erase()
    return new
