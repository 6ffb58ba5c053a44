"""Builders for the loop nest: index arithmetic, ``scf.for``/``scf.if`` with carried values."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, scf, tensor

Carried = list[ir.Value]
PARALLEL_ATTR = "sparse_iter.parallel"


def index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def to_index(value: ir.Value, unsigned: bool = False) -> ir.Value:
    """An integer as an index: sign-extended, or zero-extended if ``unsigned``."""
    if isinstance(value.type, ir.IndexType):
        return value
    cast = arith.index_castui if unsigned else arith.index_cast
    return cast(ir.IndexType.get(), value)


def load_index(buffer: ir.Value, pos: ir.Value) -> ir.Value:
    """``buffer[pos]`` of an integer buffer (coordinates: ELL pads with -1), as an index."""
    return to_index(tensor.extract(buffer, [pos]))


def load_position(buffer: ir.Value, pos: ir.Value) -> ir.Value:
    """``buffer[pos]`` of a positions buffer, as an index: narrow positions are unsigned.

    That is how upstream reads them: 8-bit positions built in IR address 255
    entries. (The Python ABI's signed numpy buffers stop at 127, checked at
    the call; coordinates stay signed, as ELL's padding is -1.)
    """
    return to_index(tensor.extract(buffer, [pos]), unsigned=True)


def load_coordinate(buffer: ir.Value, pos: ir.Value) -> ir.Value:
    """``buffer[pos]`` of the coordinates of a level with no padding (compressed,
    singleton), as an index: unsigned where they are narrower than 32 bits, as upstream
    reads them (8-bit coordinates built in IR address 256 columns: column 129 read
    signed was -127, an address before a row's start). 32- and 64-bit ones are read
    signed, which keeps LLVM's 32-bit-index gathers (the Python ABI's signed numpy
    buffers stop at ``2**(w - 1) - 1``, checked at the call)."""
    element = ir.RankedTensorType(buffer.type).element_type
    narrow = isinstance(element, ir.IntegerType) and element.width < 32
    return to_index(tensor.extract(buffer, [pos]), unsigned=narrow)


def add(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.addi(a, b)


def mul(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.muli(a, b)


def for_loop(
    lb: ir.Value,
    ub: ir.Value,
    step: ir.Value,
    carried: Sequence[ir.Value],
    body: Callable[[ir.Value, Carried], Carried],
    parallel: bool = False,
) -> Carried:
    """``scf.for`` carrying ``carried``; ``body(iv, values)`` returns the values to yield."""
    loop = scf.ForOp(lb, ub, step, list(carried))
    if parallel:
        loop.operation.attributes[PARALLEL_ATTR] = ir.UnitAttr.get()
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(body(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)


def if_then(
    cond: ir.Value, carried: Sequence[ir.Value], body: Callable[[Carried], Carried]
) -> Carried:
    """``scf.if cond`` running ``body``; the else branch passes ``carried`` through."""
    op = scf.IfOp(cond, [v.type for v in carried], has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(body(list(carried)))
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(list(carried))
    return list(op.results)


def if_else(
    cond: ir.Value,
    types: Sequence[ir.Type],
    then: Callable[[], Carried],
    otherwise: Callable[[], Carried],
) -> Carried:
    """``scf.if cond`` yielding ``then()``, else ``otherwise()`` (values of ``types``)."""
    op = scf.IfOp(cond, list(types), has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(then())
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(otherwise())
    return list(op.results)


def while_loop(
    inits: list[ir.Value],
    cond: Callable[[Carried], tuple[ir.Value, Carried]],
    body: Callable[[Carried], Carried],
) -> Carried:
    """``scf.while``: ``cond(values) -> (keep going, values passed on)``; ``body`` steps."""
    types = [v.type for v in inits]
    op = scf.WhileOp(types, inits)
    before = op.before.blocks.append(*types)
    with ir.InsertionPoint(before):
        keep, passed = cond(list(before.arguments))
        scf.ConditionOp(keep, passed)
    after = op.after.blocks.append(*types)
    with ir.InsertionPoint(after):
        scf.YieldOp(body(list(after.arguments)))
    return list(op.results)


State = dict[str, ir.Value]


def for_state(
    lb: ir.Value,
    ub: ir.Value,
    state: State,
    body: Callable[[ir.Value, State], State],
    parallel: bool = False,
) -> State:
    """:func:`for_loop` (step 1) carrying named values."""
    keys = list(state)

    def inner(iv: ir.Value, values: Carried) -> Carried:
        out = body(iv, dict(zip(keys, values, strict=True)))
        return [out[k] for k in keys]

    results = for_loop(lb, ub, index(1), [state[k] for k in keys], inner, parallel)
    return dict(zip(keys, results, strict=True))


def if_state(cond: ir.Value, state: State, body: Callable[[State], State]) -> State:
    """:func:`if_then` carrying named values."""
    keys = list(state)

    def inner(values: Carried) -> Carried:
        out = body(dict(zip(keys, values, strict=True)))
        return [out[k] for k in keys]

    return dict(zip(keys, if_then(cond, [state[k] for k in keys], inner), strict=True))
