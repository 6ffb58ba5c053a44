"""``gpu.shuffle`` for a warp, as host code over every lane's value (width 32)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

from sparsecomp.transforms._lockstep import Lockstep, Refusal, index

#: The modes whose source lane is emulated.
_MODES = ("idx", "xor", "down", "up")


def emulate_shuffle(state: Lockstep, op: ir.Operation) -> None:
    """Every lane of each warp reads the value of its source lane (its own where none).

    As ``shfl.sync`` with all 32 lanes: ``idx`` reads lane ``offset``, ``xor``
    lane ``lane ^ offset``, ``down`` lane ``lane + offset`` and ``up`` lane
    ``lane - offset``; a source outside the warp is invalid (the second
    result false) and the lane keeps its own value.
    """
    mode = str(op.attributes["mode"]).split()[-1].rstrip(">")
    value, offset, width = op.operands
    if mode not in _MODES:
        raise Refusal(op, f"gpu.shuffle {mode} is not emulated")
    if not _is_constant(width, 32):
        raise Refusal(op, "gpu.shuffle is emulated for a width of 32 lanes only")
    values, offsets = state.lane_array(value), state.lane_array(offset)
    result = state.new_array(value.type)
    valid = state.new_array(op.results[1].type)
    state.arrays[op.results[0]] = result
    state.arrays[op.results[1]] = valid
    warps = scf.ForOp(index(0), arith.ceildivsi(state.lanes, index(32)), index(1))
    with ir.InsertionPoint(warps.body):
        first = arith.muli(warps.induction_variable, index(32))
        count = arith.minsi(arith.subi(state.lanes, first), index(32))
        lanes = scf.ForOp(index(0), count, index(1))
        with ir.InsertionPoint(lanes.body):
            lane = lanes.induction_variable
            raw = memref.load(offsets, [arith.addi(first, lane)])
            off = arith.index_cast(ir.IndexType.get(), raw)
            source = {
                "idx": lambda: off,
                "xor": lambda: arith.xori(lane, off),
                "down": lambda: arith.addi(lane, off),
                "up": lambda: arith.subi(lane, off),
            }[mode]()
            inside = arith.andi(
                arith.cmpi(arith.CmpIPredicate.sge, source, index(0)),
                arith.cmpi(arith.CmpIPredicate.slt, source, count),
            )
            read = arith.select(inside, source, lane)
            memref.store(memref.load(values, [arith.addi(first, read)]), result,
                         [arith.addi(first, lane)])  # fmt: skip
            Lockstep.store(inside, valid, arith.addi(first, lane))
            scf.YieldOp([])
        scf.YieldOp([])


def _is_constant(value: ir.Value, expected: int) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    return ir.IntegerAttr(owner.attributes["value"]).value == expected
