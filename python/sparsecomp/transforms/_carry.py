"""Carrying an ``i1`` out of the ``scf`` ops around it, for passes that must report
something found deep inside loops (``sparse-iter-guard-coordinates``).

A flag defined in a block becomes a value in the block of the op around it:
an ``scf.for`` gets one more ``iter_args`` value (or-ed with the flag at the end
of each iteration), an ``scf.if`` one more result (the flag from its branch,
false from the other, an else branch made where there was none), an
``scf.while`` one more value through both regions (or-ed in the region that
defines the flag). Each op is rebuilt with its regions moved over as they are;
nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, scf

from sparsecomp.ir.walk import rebuild


class CarryError(Exception):
    """The flag is inside an op it cannot be carried out of (``op``)."""

    def __init__(self, op: ir.Operation) -> None:
        super().__init__(f"cannot carry a flag out of '{op.name}'")
        self.op = op


def carry_out(
    flag: ir.Value, block: ir.Block, stop: Callable[[ir.Operation], bool]
) -> tuple[ir.Value, ir.Block]:
    """``flag`` (an ``i1`` defined in ``block``) carried out of the ops around it up
    to the first one ``stop`` accepts: the value there and its block (the body of
    the op ``stop`` accepted). Raises :class:`CarryError` at another kind of op."""
    while not stop(parent := block.owner.operation):
        if parent.name == "scf.for":
            flag, block = _through_for(parent, flag)
        elif parent.name == "scf.if":
            flag, block = _through_if(parent, block, flag)
        elif parent.name == "scf.while":
            flag, block = _through_while(parent, block, flag)
        else:
            raise CarryError(parent)
    return flag, block


def boolean(value: bool) -> ir.Value:
    """An ``arith.constant`` ``i1`` at the current insertion point."""
    i1 = ir.IntegerType.get_signless(1)
    return arith.ConstantOp(i1, ir.IntegerAttr.get(i1, int(value))).result


def _rebuild(op: ir.Operation, operand: ir.Value | None) -> ir.Operation:
    """``op`` with one more ``i1`` result (and ``operand``, if any, last): its regions
    move over as they are."""
    i1 = ir.IntegerType.get_signless(1)
    operands = list(op.operands) + ([operand] if operand is not None else [])
    return rebuild(op, operands, [*[r.type for r in op.results], i1])


def _extend_terminator(block: ir.Block, value: ir.Value) -> None:
    """``block``'s terminator with ``value`` as one more operand."""
    old = list(block.operations)[-1].operation
    ir.Operation.create(
        old.name,
        operands=[*old.operands, value],
        attributes={name: old.attributes[name] for name in old.attributes},
        loc=old.location,
        ip=ir.InsertionPoint(old),
    )
    old.erase()


def _or_before_end(block: ir.Block, a: ir.Value, b: ir.Value) -> ir.Value:
    terminator = list(block.operations)[-1].operation
    with ir.InsertionPoint(terminator), terminator.location:
        return arith.OrIOp(a, b).result


def _through_for(loop: ir.Operation, bad: ir.Value) -> tuple[ir.Value, ir.Block]:
    loc = loop.location
    with ir.InsertionPoint(loop), loc:
        init = boolean(False)
    new = _rebuild(loop, init)
    body = new.regions[0].blocks[0]
    carried = body.add_argument(ir.IntegerType.get_signless(1), loc)
    _extend_terminator(body, _or_before_end(body, carried, bad))
    return new.results[-1], new.block


def _through_if(branch: ir.Operation, inside: ir.Block, bad: ir.Value) -> tuple[ir.Value, ir.Block]:
    loc = branch.location
    with ir.InsertionPoint(branch), loc:
        false = boolean(False)
    which = 0 if inside.region == branch.regions[0] else 1
    new = _rebuild(branch, None)
    if not new.regions[1].blocks:  # no else branch: one that yields false
        block = new.regions[1].blocks.append()
        with ir.InsertionPoint(block), loc:
            scf.YieldOp([])
    for n, region in enumerate(new.regions):
        _extend_terminator(region.blocks[0], bad if n == which else false)
    return new.results[-1], new.block


def _through_while(
    loop: ir.Operation, inside: ir.Block, bad: ir.Value
) -> tuple[ir.Value, ir.Block]:
    i1 = ir.IntegerType.get_signless(1)
    loc = loop.location
    with ir.InsertionPoint(loop), loc:
        init = boolean(False)
    in_before = inside.region == loop.regions[0]
    new = _rebuild(loop, init)
    before, after = new.regions[0].blocks[0], new.regions[1].blocks[0]
    seen = before.add_argument(i1, loc)
    passed = after.add_argument(i1, loc)
    _extend_terminator(before, _or_before_end(before, seen, bad) if in_before else seen)
    _extend_terminator(after, passed if in_before else _or_before_end(after, passed, bad))
    return new.results[-1], new.block
