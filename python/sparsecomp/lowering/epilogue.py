"""An elementwise consumer of a sparse nest's result, applied as the nest writes it.

A linear layer is often followed by its activation: ``Y = gelu(X W^T + b)``.
Lowered one op at a time, the nest writes ``X W^T + b`` to memory and a
second loop reads it back, applies GELU and writes it again. Where the
consumer is *elementwise* (every loop parallel, identity maps, one input: the
nest's result, the body not reading its output) and the nest writes each
output element exactly once (:meth:`~.nest.NestEmitter.fusible`; with the
reduction cut in slices, once per slice, the last slice's write being the
final one), the consumer's body is evaluated on the final accumulators
instead, in registers, just before they are stored: an *epilogue*, as a
BLAS or CUTLASS applies one. The consumer is then erased.

The body is re-emitted by :mod:`.body` on the accumulators as they are:
vectors of the output row chunk, or a scalar. Its ops must be ``arith`` or
``math`` ops (no integer division or remainder: the lanes past a row's end
hold garbage and are never stored, but a division by zero there would
trap), reading the accumulator, constants, and values defined before the
nest (function arguments, or ops that come before it in its block).
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.ir.attrs import encoding_of
from sparsecomp.ir.linalg_ops import iterator_types
from sparsecomp.lowering import body as bodies

#: integer ops that trap on a zero divisor (a masked-off lane may hold one)
_TRAPPING = (
    "arith.divsi",
    "arith.divui",
    "arith.remsi",
    "arith.remui",
    "arith.ceildivsi",
    "arith.ceildivui",
    "arith.floordivsi",
)


def _identity(attr: ir.Attribute) -> bool:
    m = ir.AffineMapAttr(attr).value
    return m == ir.AffineMap.get_identity(m.n_dims)


def _defined_before(value: ir.Value, op: ir.Operation) -> bool:
    """Whether ``value`` (from outside a consumer's body) is available at ``op``:
    an argument of a block enclosing ``op``, or the result of an op before
    ``op`` in ``op``'s block. (``op`` may come as an OpView: a composable
    operand's parts are clones, whose ``linalg.generic`` view has no ``block``.)"""
    op = op.operation
    if isinstance(value, ir.BlockArgument):
        holder: ir.Operation = op
        while True:
            try:
                block = holder.block
            except ValueError:  # the top of the IR
                return False
            if value.owner == block:
                return True
            parent = block.owner
            if parent is None:
                return False
            holder = parent.operation
    owner = value.owner.operation
    if owner.block != op.block:
        return False
    for earlier in op.block.operations:
        earlier = earlier.operation
        if earlier == op:
            return False
        if earlier == owner:
            return True
    return False


def consumer(op: ir.Operation) -> ir.Operation | None:
    """The elementwise ``linalg.generic`` to apply as ``op``'s epilogue, if any.

    ``op``'s result must have that one use, as the consumer's only input; the
    consumer's result has ``op``'s result type (no encoding), and its body
    passes the checks of the module docstring.
    """
    if len(op.results) != 1:
        return None
    result = op.results[0]
    uses = list(result.uses)
    if len(uses) != 1:
        return None
    user = uses[0].owner
    user = getattr(user, "operation", user)
    if user.name != "linalg.generic" or len(user.operands) != 2 or len(user.results) != 1:
        return None
    if user.operands[0] != result or user.results[0].type != result.type:
        return None
    if encoding_of(result.type) is not None or encoding_of(user.operands[1].type) is not None:
        return None
    if any(t != "parallel" for t in iterator_types(user)):
        return None
    if not all(_identity(m) for m in user.attributes["indexing_maps"]):
        return None
    block = user.regions[0].blocks[0]
    if list(block.arguments[1].uses):  # reads its output
        return None
    own = [inner.operation for inner in block.operations]
    for inner in block.operations:
        inner = inner.operation
        if inner.name == "linalg.yield":
            continue
        name = inner.name
        if name.split(".")[0] not in ("arith", "math") or name in _TRAPPING or len(inner.regions):
            return None
        for v in inner.operands:
            if isinstance(v.type, ir.ShapedType):
                return None
            if v == block.arguments[0]:
                continue
            if not isinstance(v, ir.BlockArgument) and v.owner.operation in own:
                continue
            if not _defined_before(v, op):
                return None
    return user


def apply(generic: ir.Operation, value: ir.Value) -> ir.Value:
    """``generic``'s body evaluated on ``value`` (a vector or a scalar accumulator),
    emitted at the insertion point."""
    block = generic.regions[0].blocks[0]
    if isinstance(value.type, ir.VectorType):
        lanes = ir.VectorType(value.type).shape[0]
        return bodies.emit_vector(block, [value, value], lanes)
    return bodies.emit_scalar(block, [value, value], {})
