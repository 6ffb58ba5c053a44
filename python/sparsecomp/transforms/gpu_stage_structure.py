"""Pass ``sparse-iter-gpu-stage-structure``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, memref, nvvm, scf
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms._lockstep import inside
from sparsecomp.transforms._shared_memory import is_workgroup
from sparsecomp.transforms.base import SparsecompPass

#: The lanes of a warp: the chunk a warp stages at once.
WARP = 32
#: Ops a loop staged by its warp may sit in (each with warp-uniform bounds or condition).
_ENCLOSING = ("scf.for", "scf.if")
#: Launch body arguments: block ids 0-2, thread ids 3-5, then sizes, then attributions.
_LANE, _WARP_ROW, _IDS = 3, 4, 12


def _owner(value: ir.Value) -> ir.Operation | None:
    """The op defining ``value``, or None for a block argument."""
    if isinstance(value.owner, ir.Block):
        return None
    return value.owner.operation


def _constant(value: ir.Value) -> int | None:
    op = _owner(value)
    if op is None or op.name != "arith.constant":
        return None
    return int(ir.IntegerAttr(op.attributes["value"]).value)


class _Launch:
    """What the staging needs to know of one ``gpu.launch``."""

    def __init__(self, launch: ir.Operation) -> None:
        self.launch = launch
        self.body = launch.regions[0].blocks[0]
        self.lane = self.body.arguments[_LANE]
        self.warp_row = self.body.arguments[_WARP_ROW]
        self.ops = preorder(launch)[1:]
        self._lane_dependent: dict[ir.Value, bool] = {}

    def read_only(self, buffer: ir.Value) -> bool:
        """A rank-1 global buffer from outside the launch that it only loads from."""
        ty = buffer.type
        if not isinstance(ty, ir.MemRefType) or ty.rank != 1 or is_workgroup(ty):
            return False
        owner = _owner(buffer)
        if owner is not None and inside(owner, self.launch):
            return False
        if isinstance(buffer, ir.BlockArgument) and buffer.owner == self.body:
            return False
        return all(
            use.owner.operation.name in ("memref.load", "memref.dim")
            for use in buffer.uses
            if inside(use.owner.operation, self.launch)
        )

    def varies(self, value: ir.Value) -> bool:
        """Whether ``value`` may differ between the lanes of a warp (conservative)."""
        if value in self._lane_dependent:
            return self._lane_dependent[value]
        self._lane_dependent[value] = True  # cycles through loops: assume it varies
        self._lane_dependent[value] = self._varies(value)
        return self._lane_dependent[value]

    def _varies(self, value: ir.Value) -> bool:
        op = _owner(value)
        if op is None:
            block = value.owner
            parent = block.owner.operation if block.owner is not None else None
            if block == self.body:
                return value == self.lane
            if parent is None or not inside(parent, self.launch):
                return False  # a value from outside the launch
            if parent.name == "scf.for" and value == block.arguments[0]:
                return not self.uniform_context(parent) or any(
                    self.varies(v) for v in parent.operands[:3]
                )
            return True
        if not inside(op, self.launch):
            return False
        if len(op.regions):
            return True  # results of loops and branches: not followed
        if op.name == "memref.load" and not self.read_only(op.operands[0]):
            return True  # memory the lanes write
        if op.name.startswith("gpu.thread_id"):
            return "x" in str(op.attributes["dimension"])
        return any(self.varies(v) for v in op.operands)

    def uniform_context(self, op: ir.Operation) -> bool:
        """Whether every op around ``op`` up to the launch runs for all lanes of a warp or none."""
        parent = op.parent
        while parent is not None and parent != self.launch:
            if parent.name not in _ENCLOSING:
                return False
            if parent.name == "scf.if" and self.varies(parent.operands[0]):
                return False
            if parent.name == "scf.for" and any(self.varies(v) for v in parent.operands[:3]):
                return False
            parent = parent.parent
        return parent == self.launch

    def staged_loads(self, loop: ir.Operation) -> list[ir.Operation]:
        """The loads ``buffer[iv]`` of read-only buffers in ``loop`` (a candidate), else []."""
        if loop.name != "scf.for" or _constant(loop.operands[2]) != 1:
            return []
        if any(self.varies(v) for v in loop.operands[:2]) or not self.uniform_context(loop):
            return []
        iv = loop.regions[0].blocks[0].arguments[0]
        return [
            use.owner.operation
            for use in iv.uses
            if use.owner.operation.name == "memref.load"
            and list(use.owner.operation.operands[1:]) == [iv]
            and self.read_only(use.owner.operation.operands[0])
        ]


@dataclasses.dataclass(frozen=True)
class GpuStageStructurePass(SparsecompPass):
    """Stage a warp's walk over sparse structure in shared memory, 32 entries at a time.

    Runs in ``sparsecomp-cuda-schedule`` after the loops became ``gpu.launch``
    ops. In a launch whose blocks are warps side by side (32 lanes on
    ``thread_x``, one warp per ``thread_y``, as SpMM's columns are mapped;
    SDDMM's groups of lanes walk 4 entries a step and are left alone), a
    loop that every lane of a warp runs with the same bounds (a row's
    entries, from the row's positions) reads the same coordinate and value
    at each step on all 32 lanes: 32 loads per chunk of 32 entries, each a
    request of its own. This pass makes the warp load
    the chunk once, coalesced, each lane one entry, into a shared-memory
    buffer of its own (GE-SpMM's coalesced row caching), wait at
    ``nvvm.bar.warp.sync``, and walk the chunk from shared memory, where
    every lane reads the same word at once (a broadcast, no bank conflict),
    then wait again before the next chunk overwrites it.

    A loop qualifies when its step is 1, its bounds and everything around
    it up to the launch (``scf.if`` conditions, ``scf.for`` bounds) do not
    depend on the lane, and it loads ``buffer[iv]`` from rank-1 buffers the
    launch never writes; those loads (at any depth of its body) are staged,
    one ``memref<Wx32xT, workgroup>`` attribution per buffer for ``W``
    warps per block, and other uses of ``iv`` become ``chunk + t``. Loops
    inside a staged loop are left alone. Launches of other shapes are left
    as they are.

    Before (one warp per row; lanes over output columns):

    ```mlir
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %c = memref.load %crd[%p] : memref<?xi32>
      %v = memref.load %val[%p] : memref<?xf32>
      ...
    }
    ```

    After:

    ```mlir
    %s = scf.for %q = %lo to %hi step %c32 iter_args(%acc0 = %zero) -> (f32) {
      %e = arith.addi %q, %lane : index
      scf.if (%e < %hi) {
        memref.store (memref.load %crd[%e]), %crd_w[%warp, %lane]
        memref.store (memref.load %val[%e]), %val_w[%warp, %lane]
      }
      nvvm.bar.warp.sync %all : i32
      %n = arith.minsi (%hi - %q), %c32 : index
      %r = scf.for %t = %c0 to %n step %c1 iter_args(%acc = %acc0) -> (f32) {
        %c = memref.load %crd_w[%warp, %t] : memref<4x32xi32, #gpu.address_space<workgroup>>
        %v = memref.load %val_w[%warp, %t] : memref<4x32xf32, #gpu.address_space<workgroup>>
        ...
      }
      nvvm.bar.warp.sync %all : i32
      scf.yield %r : f32
    }
    ```
    """

    NAME = "sparse-iter-gpu-stage-structure"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for launch in [o for o in preorder(op) if o.name == "gpu.launch"]:
            warps = self._warps(launch)
            if warps is None:
                continue
            info = _Launch(launch)
            # All candidates first: staging erases loads that a walk would hold.
            chosen: list[tuple[ir.Operation, list[ir.Operation]]] = []
            for loop in info.ops:
                if any(inside(loop, outer) for outer, _ in chosen):
                    continue
                loads = info.staged_loads(loop)
                if loads:
                    chosen.append((loop, loads))
            for loop, loads in chosen:
                with loop.location:
                    _stage(info, loop, loads, warps)

    @staticmethod
    def _warps(launch: ir.Operation) -> int | None:
        """Warps per block where a block is ``32 x W x 1`` threads, else None."""
        view = launch.opview
        if len(view.asyncDependencies) or len(launch.results):
            return None
        body = launch.regions[0].blocks[0]
        attributions = 0
        if "workgroup_attributions" in launch.attributes:
            attributions = int(ir.IntegerAttr(launch.attributes["workgroup_attributions"]).value)
        if len(body.arguments) != _IDS + attributions:
            return None  # private attributions follow: new ones cannot be appended
        sizes = [_constant(v) for v in (view.blockSizeX, view.blockSizeY, view.blockSizeZ)]
        if sizes[0] != WARP or sizes[2] != 1 or sizes[1] is None:
            return None
        return sizes[1]


def _attribution(info: _Launch, element: ir.Type, warps: int) -> ir.Value:
    """A new ``memref<warps x 32 x element, workgroup>`` attribution of the launch."""
    space = ir.Attribute.parse("#gpu.address_space<workgroup>")
    ty = ir.MemRefType.get([warps, WARP], element, memory_space=space)
    launch = info.launch
    count = 0
    if "workgroup_attributions" in launch.attributes:
        count = int(ir.IntegerAttr(launch.attributes["workgroup_attributions"]).value)
    launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64), count + 1
    )
    return info.body.add_argument(ty, launch.location)


def _stage(info: _Launch, loop: ir.Operation, loads: list[ir.Operation], warps: int) -> None:
    """Rewrite ``loop`` into chunks of 32 entries staged in shared memory (see the pass)."""
    buffers: dict[ir.Value, ir.Value] = {}
    for load in loads:
        source = load.operands[0]
        if source not in buffers:
            buffers[source] = _attribution(info, ir.MemRefType(source.type).element_type, warps)
    lower, upper = loop.operands[0], loop.operands[1]
    index = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        width = arith.constant(index, WARP)
        chunks = scf.ForOp(lower, upper, width, list(loop.operands[3:]))
    for old, new in zip(loop.results, chunks.results, strict=True):
        old.replace_all_uses_with(new)
    with ir.InsertionPoint(chunks.body), loop.location:
        start = chunks.induction_variable
        entry = arith.addi(start, info.lane)
        present = scf.IfOp(arith.cmpi(arith.CmpIPredicate.slt, entry, upper))
        with ir.InsertionPoint(present.then_block):
            for source, shared in buffers.items():
                memref.store(memref.load(source, [entry]), shared, [info.warp_row, info.lane])
            scf.YieldOp([])
        all_lanes = arith.constant(ir.IntegerType.get_signless(32), -1)
        nvvm.bar_warp_sync(all_lanes)
        count = arith.minsi(arith.subi(upper, start), width)
        zero = arith.constant(index, 0)
    loop.move_after(_owner(zero))
    with ir.InsertionPoint(chunks.body), loop.location:
        nvvm.bar_warp_sync(all_lanes)
        scf.YieldOp(list(loop.results))
    loop.operands[0] = zero
    loop.operands[1] = count
    for position, carried in enumerate(chunks.inner_iter_args):
        loop.operands[3 + position] = carried
    body = loop.regions[0].blocks[0]
    step = body.arguments[0]
    keep: list[ir.Operation] = []
    for load in loads:
        with ir.InsertionPoint(load), load.location:
            staged = memref.load(buffers[load.operands[0]], [info.warp_row, step])
        load.results[0].replace_all_uses_with(staged)
        keep.append(_owner(staged))
        load.erase()
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        position = arith.addi(start, step)
    keep.append(_owner(position))
    step.replace_all_uses_except(position, keep)
