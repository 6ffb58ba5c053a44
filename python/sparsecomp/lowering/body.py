"""Re-emit the body of a ``linalg.generic`` inside a loop nest, on scalars or vectors.

The scalar form clones each op and rewires its operands (``linalg.index``
becomes the loop index of its dimension). The vector form re-creates each
``arith``/``math`` op on ``vector<V x T>`` operands; scalar operands (block
arguments that do not vary along the vector dimension, constants, values
from outside the op) are broadcast. A math function without a vector form in
the CPU pipeline (:data:`LANE_BY_LANE`: no LLVM intrinsic, so a libm call,
which ``convert-math-to-libm`` makes only after vectors are lowered) is
computed lane by lane, ``f32`` ``erf`` excepted (``sparse-iter-approximate-math``
makes it arithmetic).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, vector

#: math ops ``convert-math-to-llvm`` leaves to libm (no intrinsic): on vectors they
#: are emitted per lane (f32 ``erf`` excepted, see the module)
LANE_BY_LANE = ("math.erf", "math.erfc", "math.cbrt", "math.atanh", "math.acosh", "math.asinh")

#: Float ops whose rounding the lowering relaxes (see :func:`relax`).
_FAST = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf")
FASTMATH = "#arith.fastmath<reassoc,contract>"


def relax(op: ir.Operation) -> None:
    """Allow reassociation and FMA contraction on a float op of the body.

    Sparse kernels sum in an order of their own choosing anyway (scipy and
    MLIR's sparsifier differ too): reassociation lets LLVM vectorize
    reductions over positions and contract ``a * b + c`` into FMAs.
    """
    if op.name in _FAST:
        op.attributes["fastmath"] = ir.Attribute.parse(FASTMATH)


def _rewire(op: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    """Replace operands of ``op`` and of ops nested in it that ``mapping`` knows."""

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for i, v in enumerate(list(inner.operands)):
            if v in mapping:
                inner.operands[i] = mapping[v]
        return ir.WalkResult.ADVANCE

    op.walk(visit)


def emit_scalar(block: ir.Block, args: list[ir.Value], index: dict[int, ir.Value]) -> ir.Value:
    """The yielded value of ``block`` for arguments ``args``, emitted at the insertion point."""
    mapping: dict[ir.Value, ir.Value] = dict(zip(block.arguments, args, strict=True))
    for op in block.operations:
        op = op.operation
        if op.name == "linalg.yield":
            return mapping.get(op.operands[0], op.operands[0])
        if op.name == "linalg.index":
            mapping[op.results[0]] = index[ir.IntegerAttr(op.attributes["dim"]).value]
            continue
        new = op.clone()
        _rewire(new.operation, mapping)
        relax(new.operation)
        for old, res in zip(op.results, new.results, strict=True):
            mapping[old] = res
    raise AssertionError("linalg.generic body without linalg.yield")


def _as_vector(value: ir.Value, lanes: int) -> ir.Value:
    if isinstance(value.type, ir.VectorType):
        return value
    return vector.broadcast(ir.VectorType.get([lanes], value.type), value)


def emit_vector(block: ir.Block, args: list[ir.Value], lanes: int) -> ir.Value:
    """The yielded vector of ``block``; ``args`` are vectors or scalars to broadcast."""
    mapping: dict[ir.Value, ir.Value] = dict(zip(block.arguments, args, strict=True))
    for op in block.operations:
        op = op.operation
        if op.name == "linalg.yield":
            return _as_vector(mapping.get(op.operands[0], op.operands[0]), lanes)
        if op.name == "arith.constant":  # scalar; broadcast where used
            mapping[op.results[0]] = op.clone().results[0]
            continue
        operands = [_as_vector(mapping.get(v, v), lanes) for v in op.operands]
        if _lane_by_lane(op):
            mapping[op.results[0]] = _per_lane(op, operands, lanes)
            continue
        attrs = op.attributes
        new = ir.Operation.create(
            op.name,
            results=[ir.VectorType.get([lanes], r.type) for r in op.results],
            operands=operands,
            attributes={attrs[i].name: attrs[i].attr for i in range(len(attrs))},
        )
        relax(new)
        for old, res in zip(op.results, new.results, strict=True):
            mapping[old] = res
    raise AssertionError("linalg.generic body without linalg.yield")


def _lane_by_lane(op: ir.Operation) -> bool:
    """Whether ``op`` has no vector form (see :data:`LANE_BY_LANE`)."""
    if op.name not in LANE_BY_LANE or len(op.results) != 1:
        return False
    return not (op.name == "math.erf" and isinstance(op.results[0].type, ir.F32Type))


def _per_lane(op: ir.Operation, operands: list[ir.Value], lanes: int) -> ir.Value:
    """``op`` on each lane of its vector ``operands``, gathered into a vector."""
    ty = op.results[0].type
    attrs = op.attributes
    named = {attrs[i].name: attrs[i].attr for i in range(len(attrs))}
    out = arith.constant(
        ir.VectorType.get([lanes], ty),
        ir.DenseElementsAttr.get_splat(ir.VectorType.get([lanes], ty), ir.FloatAttr.get(ty, 0.0)),
    )
    for lane in range(lanes):
        scalars = [vector.extract(v, [], [lane]) for v in operands]
        one = ir.Operation.create(op.name, results=[ty], operands=scalars, attributes=named)
        out = vector.insert(one.results[0], out, [], [lane])
    return out
