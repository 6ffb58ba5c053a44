"""Threads that wait for each other, emulated in sequence: loop fission at collectives.

A launch body whose threads meet at a collective (``nvgpu.mma.sync`` or
``gpu.shuffle``, warp operations; ``gpu.barrier``, a block one) cannot run one thread after the
other. :class:`Lockstep` runs it in *phases* instead (the MCUDA approach):
the body's ops between two collectives become a loop over the threads of a
group (a warp, or the whole block when it has barriers), and the collective
runs once for the group, on every thread's operands.

- A value one phase defines and a later one uses is kept per thread, in an
  array of the group's size (``memref.alloca`` before the launch): stored
  where it is defined, loaded where it is used.
- A loop or ``if`` that holds a collective runs once for the group; its
  bounds and condition are the group's first thread's (a correct kernel has
  them uniform, as ``mma.sync`` and ``bar.sync`` require), its loop-carried
  values and results live in arrays, and its body is split the same way.
- ``gpu.barrier`` and ``nvvm.bar.warp.sync`` (a warp's barrier) are the
  boundary between two phases and nothing else.
- ``nvgpu.mma.sync`` and ``nvgpu.mma.sp.sync`` are run by :mod:`._mma_emulation`,
  ``gpu.shuffle`` by :mod:`._shuffle_emulation`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

#: Warp-wide ops (one group per warp) and block-wide ones (one group per block).
WARP_COLLECTIVES = ("nvgpu.mma.sync", "nvgpu.mma.sp.sync", "gpu.shuffle", "nvvm.bar.warp.sync")
BLOCK_COLLECTIVES = ("gpu.barrier",)
COLLECTIVES = WARP_COLLECTIVES + BLOCK_COLLECTIVES


class Refusal(Exception):
    """An op the emulation cannot run faithfully; reported at the op."""

    def __init__(self, op: ir.Operation, message: str) -> None:
        super().__init__(message)
        self.op, self.message = op, message


def _ops(root: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def collectives(root: ir.Operation) -> list[ir.Operation]:
    return [op for op in _ops(root) if op.name in COLLECTIVES]


def index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _stored_type(ty: ir.Type) -> ir.Type:
    """What an array element holds for ``ty``: n-D vectors flattened, i1 as i8."""
    if isinstance(ty, ir.VectorType):
        vec = ir.VectorType(ty)
        return ir.VectorType.get([math.prod(vec.shape)], vec.element_type) if vec.rank != 1 else ty
    if ty == ir.IntegerType.get_signless(1):
        return ir.IntegerType.get_signless(8)
    return ty


def _owner(value: ir.Value) -> ir.Operation:
    owner = value.owner
    return owner.owner if isinstance(owner, ir.Block) else owner.operation


def inside(op: ir.Operation, container: ir.Operation) -> bool:
    """Whether ``op`` is ``container`` or nested in it."""
    at: ir.Operation | None = op
    while at is not None:
        if at == container:
            return True
        at = at.parent
    return False


class Lockstep:
    """One launch's emulation state: the per-thread arrays and the group's thread ids.

    ``group`` is the group's thread count as the arrays are sized, ``lanes``
    how many threads the current group has, ``group_index`` which group of
    the block it is; ``thread_args`` are the launch body's thread id
    arguments (x, y, z) and ``block`` the block sizes.
    """

    def __init__(
        self,
        arrays_at: ir.InsertionPoint,
        group: ir.Value,
        lanes: ir.Value,
        group_index: ir.Value,
        thread_args: list[ir.Value],
        block: list[ir.Value],
        collective: Callable[[Lockstep, ir.Operation], None],
        blockwide: bool,
    ) -> None:
        self.arrays_at, self.group, self.lanes = arrays_at, group, lanes
        self.group_index, self.thread_args, self.block = group_index, thread_args, block
        self.collective, self.blockwide = collective, blockwide
        self.arrays: dict[ir.Value, ir.Value] = {}
        self.dead: list[ir.Operation] = []

    # Per-thread arrays.

    def new_array(self, ty: ir.Type, size: ir.Value | None = None) -> ir.Value:
        with self.arrays_at:
            dynamic = ir.ShapedType.get_dynamic_size()
            array_type = ir.MemRefType.get([dynamic], _stored_type(ty))
            return memref.alloca(array_type, [size or self.group], [])

    @staticmethod
    def store(value: ir.Value, array: ir.Value, lane: ir.Value) -> None:
        stored = _stored_type(value.type)
        if isinstance(value.type, ir.VectorType) and stored != value.type:
            value = vector.shape_cast(stored, value)
        elif stored != value.type:
            value = arith.extui(stored, value)
        memref.store(value, array, [lane])

    @staticmethod
    def load(array: ir.Value, ty: ir.Type, lane: ir.Value) -> ir.Value:
        value = memref.load(array, [lane])
        if isinstance(ty, ir.VectorType) and value.type != ty:
            return vector.shape_cast(ty, value)
        return arith.trunci(ty, value) if value.type != ty else value

    def lane_value(self, value: ir.Value, lane: ir.Value, ids: list[ir.Value]) -> ir.Value:
        """``value`` as thread ``lane`` of the group sees it (at the insertion point)."""
        if value in self.arrays:
            return self.load(self.arrays[value], value.type, lane)
        if value in self.thread_args:
            return ids[self.thread_args.index(value)]
        return value

    def uniform(self, value: ir.Value, user: ir.Operation) -> ir.Value:
        """``value`` as the group's first thread sees it."""
        if value in self.thread_args:
            raise Refusal(user, "the bounds or condition around a collective use the thread id")
        if value in self.arrays:
            return self.load(self.arrays[value], value.type, index(0))
        return value

    def lane_array(self, value: ir.Value) -> ir.Value:
        """The array of ``value`` per thread (filled here if ``value`` is uniform)."""
        if value in self.arrays:
            return self.arrays[value]
        array = self.new_array(value.type)
        self.lane_loop(lambda lane, ids: self.store(self.lane_value(value, lane, ids), array, lane))
        return array

    def copy(self, values: list[ir.Value], arrays: list[ir.Value]) -> None:
        """Every thread's ``values`` into ``arrays`` (all read before any is written)."""
        if not values:
            return

        def build(lane: ir.Value, ids: list[ir.Value]) -> None:
            loaded = [self.lane_value(v, lane, ids) for v in values]
            for value, array in zip(loaded, arrays, strict=True):
                self.store(value, array, lane)

        self.lane_loop(build)

    # Phases.

    def thread_ids(self, lane: ir.Value) -> list[ir.Value]:
        """``(tx, ty, tz)`` of the group's thread ``lane``."""
        sx, sy, _ = self.block
        flat = arith.addi(arith.muli(self.group_index, self.group), lane)
        rest = arith.divui(flat, sx)
        return [arith.remui(flat, sx), arith.remui(rest, sy), arith.divui(rest, sy)]

    def lane_loop(self, build: Callable[[ir.Value, list[ir.Value]], None]) -> scf.ForOp:
        """``scf.for`` over the group's threads; ``build(lane, ids)`` fills its body."""
        loop = scf.ForOp(index(0), self.lanes, index(1))
        with ir.InsertionPoint(loop.body):
            lane = loop.induction_variable
            build(lane, self.thread_ids(lane))
            scf.YieldOp([])
        return loop

    def run(self, ops: list[ir.Operation], at: ir.InsertionPoint) -> None:
        """Emulate ``ops`` (a block's ops without its terminator) at ``at``."""
        pending: list[ir.Operation] = []
        for op in ops:
            if op.name in COLLECTIVES or collectives(op):
                with at:
                    if pending:
                        self.phase(pending)
                    pending = []
                    self.meet(op)
            else:
                pending.append(op)
        if pending:
            with at:
                self.phase(pending)

    def phase(self, ops: list[ir.Operation]) -> None:
        """``ops`` (no collective among them) for every thread of the group, here."""
        loop = self.lane_loop(lambda lane, ids: None)
        lane = loop.induction_variable
        terminator = list(loop.body.operations)[-1].operation
        for op in ops:
            op.move_before(terminator)
        with ir.InsertionPoint(ops[0]):
            ids = self.thread_ids(lane)
        loaded: dict[ir.Value, ir.Value] = {}
        for op in ops:
            for user in _ops(op):
                for operand in list(user.operands):
                    if operand in self.thread_args:
                        user.replace_uses_of_with(operand, ids[self.thread_args.index(operand)])
                    elif operand in self.arrays:
                        if operand not in loaded:
                            with ir.InsertionPoint(ops[0]):
                                array = self.arrays[operand]
                                loaded[operand] = self.load(array, operand.type, lane)
                        user.replace_uses_of_with(operand, loaded[operand])
        with ir.InsertionPoint(terminator):
            for op in ops:
                for result in op.results:
                    if any(not inside(use.owner.operation, loop.operation) for use in result.uses):
                        self.arrays[result] = self.new_array(result.type)
                        self.store(result, self.arrays[result], lane)

    def meet(self, op: ir.Operation) -> None:
        """A collective, or a loop or ``if`` around one, for the whole group, here."""
        if op.name == "gpu.barrier":
            if not self.blockwide:
                raise Refusal(op, "internal: a barrier in a warp-wise emulation")
            self.dead.append(op)
        elif op.name in WARP_COLLECTIVES:
            self.collective(self, op)
            self.dead.append(op)
        elif op.name == "scf.for":
            self._loop(op)
        elif op.name == "scf.if":
            self._branch(op)
        else:
            raise Refusal(op, f"a collective inside '{op.name}' is not emulated")

    def _loop(self, op: ir.Operation) -> None:
        bounds = [self.uniform(v, op) for v in op.operands[:3]]
        carried = [self.new_array(v.type) for v in op.operands[3:]]
        self.copy(list(op.operands[3:]), carried)
        loop = scf.ForOp(*bounds)
        with ir.InsertionPoint(loop.body):
            terminator = scf.YieldOp([])
        body = op.regions[0].blocks[0]
        body.arguments[0].replace_all_uses_with(loop.induction_variable)
        for argument, array in zip(list(body.arguments)[1:], carried, strict=True):
            self.arrays[argument] = array
        inner = [o.operation for o in body.operations]
        self.run(inner[:-1], ir.InsertionPoint(terminator))
        with ir.InsertionPoint(terminator):
            self.copy(list(inner[-1].operands), carried)
        for result, array in zip(op.results, carried, strict=True):
            self.arrays[result] = array
        self.dead.append(op)

    def _branch(self, op: ir.Operation) -> None:
        condition = self.uniform(op.operands[0], op)
        results = [self.new_array(r.type) for r in op.results]
        has_else = len(op.regions[1].blocks) > 0
        branch = scf.IfOp(condition, [], has_else=has_else)
        targets = [branch.then_block] + ([branch.else_block] if has_else else [])
        for region, target in zip(op.regions, targets, strict=False):
            with ir.InsertionPoint(target):
                terminator = scf.YieldOp([])
            inner = [o.operation for o in region.blocks[0].operations]
            self.run(inner[:-1], ir.InsertionPoint(terminator))
            with ir.InsertionPoint(terminator):
                self.copy(list(inner[-1].operands), results)
        for result, array in zip(op.results, results, strict=True):
            self.arrays[result] = array
        self.dead.append(op)

    def erase_dead(self) -> None:
        """Erase the replaced collectives and regions, outermost and last first."""
        outermost = [op for op in self.dead
                     if not any(o != op and inside(op, o) for o in self.dead)]  # fmt: skip
        for op in reversed(outermost):
            op.erase()
