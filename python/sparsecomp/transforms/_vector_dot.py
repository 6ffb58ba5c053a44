"""A lane's share of a dot product, four elements a load (SDDMM's ``ld.global.v4``).

Used by :mod:`._lane_dot`. A lane of a group sums ``k = lo + l, lo + l + G,
...`` of the dense rows, one scalar load of each per step. Where the rows
allow it, it instead takes ``k = lo + 4 l + 4 G t .. + 3``: one 16-byte
vector load of each row per step, four partial sums in a ``vector<4xf32>``
and a ``vector.reduction`` at the end, so a group of 8 lanes reads 128
contiguous bytes of a row per step with 8 loads instead of 32.

A vector load needs its address 16-byte aligned, which depends on the
data: ``scf.if`` picks the vector loop at run time where every memref read
at ``k`` has an aligned base, an offset and row strides divisible by 4 and
a unit last stride, and the range ``[lo, hi)`` has ``lo`` and ``hi``
divisible by 4 (CuPy and torch views may start anywhere; a numpy array of
13 columns has rows 52 bytes apart); the scalar loop runs otherwise.

The loop body qualifies when it holds only f32 arithmetic, loads whose last
index is the loop's variable (and others invariant in the loop), loads
invariant in the loop, and the one add into the carried sum; anything else
(index arithmetic on ``k``, a branch, another element type) keeps the
scalar loop alone.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from sparsecomp.ir.walk import defined_within

#: Elements a vector load takes.
WIDTH = 4
_BYTES = 16
#: Elementwise float ops that have the same form on vectors.
_ELEMENTWISE = ("arith.", "math.")


def _const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _plan(loop: ir.Operation) -> list[ir.Value] | None:
    """The memrefs the body reads at ``[..., k]``, when the body qualifies; else None."""
    block = loop.regions[0].blocks[0]
    iv, carried = block.arguments[0], block.arguments[1]
    f32 = ir.F32Type.get()
    rows: list[ir.Value] = []
    ops = [o.operation for o in block.operations]
    for op in ops[:-1]:
        if op.name == "memref.load":
            indices = list(op.operands[1:])
            if str(op.results[0].type) != "f32" or defined_within(op.operands[0], loop):
                return None
            if not indices or any(defined_within(i, loop) for i in indices[:-1]):
                return None
            last = indices[-1]
            if last == iv:
                if op.operands[0] not in rows:
                    rows.append(op.operands[0])
            elif defined_within(last, loop):
                return None
            continue
        if not op.name.startswith(_ELEMENTWISE) or len(op.results) != 1 or op.regions:
            return None
        if op.results[0].type != f32 or any(v.type != f32 for v in op.operands):
            return None  # index arithmetic on k, comparisons, casts: not vectorized
    if not rows or ops[-1].operands[0].owner.operation.name != "arith.addf":
        return None
    return rows if carried in list(ops[-1].operands[0].owner.operation.operands) else None


def _aligned(rows: list[ir.Value], lower: ir.Value, upper: ir.Value) -> ir.Value:
    """Whether every row access at ``[..., k]`` for ``k`` in ``[lower, upper)`` step 4 is a
    whole aligned vector (see the module docstring)."""
    four, zero = _const(WIDTH), _const(0)

    def divisible(value: ir.Value, by: ir.Value) -> ir.Value:
        return arith.cmpi(arith.CmpIPredicate.eq, arith.remui(value, by), zero)

    ok = arith.andi(divisible(lower, four), divisible(upper, four))
    for row in rows:
        rank = ir.MemRefType(row.type).rank
        meta = memref.ExtractStridedMetadataOp(row)
        offset, strides = meta.offset, list(meta.strides)
        pointer = memref.extract_aligned_pointer_as_index(row)
        ok = arith.andi(ok, divisible(pointer, _const(_BYTES)))
        ok = arith.andi(ok, divisible(offset, four))
        for stride in strides[:-1]:
            ok = arith.andi(ok, divisible(stride, four))
        last = strides[rank - 1]
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, last, _const(1)))
    return ok


def vectorize(
    loop: ir.Operation, lower: ir.Value, member: ir.Value, group: int
) -> tuple[ir.Value, list[ir.Operation]]:
    """Give the lane's sum loop ``loop`` (from ``lower + member * step``, step ``step *
    group``, zero init, already split) a vector twin chosen at run time. Returns the
    lane's sum and the ops that must keep reading the loop's own result (the loop's
    result and none where the body does not qualify)."""
    rows = _plan(loop)
    step = loop.operands[2]
    if rows is None:
        return loop.results[0], []
    upper = loop.operands[1]
    f32 = ir.F32Type.get()
    with ir.InsertionPoint(loop), loop.location:
        vty = ir.VectorType.get([WIDTH], f32)
        unit = arith.cmpi(arith.CmpIPredicate.eq, step, _const(group))
        ok = arith.andi(unit, _aligned(rows, lower, upper))
        choice = scf.IfOp(ok, [f32], has_else=True)
    with ir.InsertionPoint(choice.then_block), loop.location:
        start = arith.addi(lower, arith.muli(member, _const(WIDTH)))
        zeros = arith.constant(vty, ir.DenseElementsAttr.get_splat(vty, ir.FloatAttr.get(f32, 0)))
        wide = scf.ForOp(start, upper, _const(WIDTH * group), [zeros])
        with ir.InsertionPoint(wide.body):
            total = _body(loop, wide, vty)
            scf.YieldOp([total])
        summed = vector.reduction(f32, vector.CombiningKind.ADD, wide.results[0])
        scf.YieldOp([summed])
    with ir.InsertionPoint(choice.else_block), loop.location:
        done = scf.YieldOp([loop.results[0]])
    loop.move_before(done)
    return choice.results[0], [done.operation]


def _body(loop: ir.Operation, wide: ir.Operation, vty: ir.Type) -> ir.Value:
    """The vector body of ``wide`` built from ``loop``'s; its new sum."""
    block = loop.regions[0].blocks[0]
    iv, carried = block.arguments[0], block.arguments[1]
    mapped = {iv: wide.induction_variable, carried: wide.inner_iter_args[0]}
    scalars: dict[ir.Value, ir.Value] = {}

    def widened(value: ir.Value) -> ir.Value:
        if value in mapped:
            return mapped[value]
        if value not in scalars:
            scalars[value] = vector.broadcast(vty, value)
        return scalars[value]

    ops = [o.operation for o in block.operations]
    for op in ops[:-1]:
        if op.name == "arith.constant":
            scalars[op.results[0]] = vector.broadcast(vty, op.clone().results[0])
            continue
        if op.name == "memref.load":
            indices = [mapped.get(i, i) for i in op.operands[1:]]
            if op.operands[-1] == iv:
                load = vector.LoadOp(vty, op.operands[0], indices)
                i64 = ir.IntegerType.get_signless(64)
                load.attributes["alignment"] = ir.IntegerAttr.get(i64, _BYTES)
                mapped[op.results[0]] = load.result
            else:  # invariant in the loop: a scalar, broadcast where a vector op reads it
                clone = op.clone()
                scalars[op.results[0]] = vector.broadcast(vty, clone.results[0])
            continue
        operands = [widened(v) for v in op.operands]
        attributes = {name: op.attributes[name] for name in op.attributes}
        new = ir.Operation.create(op.name, results=[vty], operands=operands, attributes=attributes)
        mapped[op.results[0]] = new.results[0]
    return mapped[ops[-1].operands[0]]
