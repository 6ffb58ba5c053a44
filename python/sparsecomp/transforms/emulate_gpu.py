"""Pass ``sparse-iter-emulate-gpu``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf
from mlir.passmanager import ExternalPass

from sparsecomp.transforms import _shared_memory as shared
from sparsecomp.transforms._alignment_checks import check_alignment
from sparsecomp.transforms._async_copy_emulation import lower_async_copies
from sparsecomp.transforms._gpu_profile import declare_profile, instrument
from sparsecomp.transforms._lockstep import BLOCK_COLLECTIVES, Lockstep, Refusal, collectives
from sparsecomp.transforms._mma_emulation import emulate_mma
from sparsecomp.transforms._shuffle_emulation import emulate_shuffle
from sparsecomp.transforms.base import SparsecompPass

#: Ops whose meaning needs threads that run together and that are not emulated
#: yet (MMAs, shuffles and ``gpu.barrier`` are: :mod:`._lockstep`).
_UNSUPPORTED = ("gpu.subgroup_reduce", "gpu.all_reduce")
#: Id and size ops inside a launch body -> index into the body's arguments
#: (block ids 0-2, thread ids 3-5, grid sizes 6-8, block sizes 9-11).
_ID_OPS = {"gpu.block_id": 0, "gpu.thread_id": 3, "gpu.grid_dim": 6, "gpu.block_dim": 9}
_DIMS = {"x": 0, "y": 1, "z": 2}


@dataclasses.dataclass(frozen=True)
class EmulateGpuPass(SparsecompPass):
    """Run each ``gpu.launch`` on the host: loops over blocks, then over threads.

    The emulation target (``cuda-emu:sm_80``) compiles the GPU schedule,
    the very ``gpu.launch`` that the CUDA target outlines into a kernel, and
    then replaces each launch by host loops: ``z, y, x`` over the grid, then
    ``z, y, x`` over the threads of a block, with every block and thread id
    and every grid and block size the body reads bound to the loop's value.
    Threads run one after the other, so a kernel whose threads never wait
    for each other computes exactly what the GPU computes; a wrong id
    mapping or guard gives a wrong answer here as there.

    Threads that meet run in phases (:mod:`._lockstep`): at a
    ``gpu.barrier`` (all threads of the block) or an ``nvgpu.mma.sync`` (the
    32 lanes of a warp, :mod:`._mma_emulation`: every lane's fragment
    registers where the PTX ISA puts them), the ops before it run for every
    thread of the group, the collective once for the group, then the ops
    after it; values that cross are kept per thread in arrays, and loops or
    ``if``s around a collective run once per group with the bounds of its
    first thread; ``nvgpu.mma.sp.sync`` reads the 2:4 metadata as the
    hardware does, ``gpu.shuffle`` (width 32) reads its source lane's value.
    Workgroup (shared) memory, as launch attributions or workgroup allocs at
    the top of the body, is one buffer per block, allocated before its
    threads run (:mod:`._shared_memory`); with ``gpu.barrier`` its threads
    meet there as on the GPU (a warp's at ``nvvm.bar.warp.sync``). Block
    reductions and private attributions are refused at the op: running them
    in sequence would not be faithful. ``cp.async`` copies into workgroup
    memory (``nvgpu.device_async_copy``) are done when issued, and their
    group ops dropped (:mod:`._async_copy_emulation`). Accesses that need an
    alignment (vector loads that declare one, ``cp.async``) check their
    address first and abort, naming the access, where a GPU would fault
    (:mod:`._alignment_checks`).

    ```mlir
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
      %row = ... %bx ... %tx ...
      gpu.terminator
    }
    // becomes
    scf.for %bz = %c0 to %c1 step %c1 { scf.for %by ... { scf.for %bx = %c0 to %n ... {
      scf.for %tz ... { scf.for %ty ... { scf.for %tx = %c0 to %c128 step %c1 {
        %row = ... %bx ... %tx ...
    } } } } } }
    ```
    """

    NAME = "sparse-iter-emulate-gpu"
    profile: bool = False

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        launches: list[ir.Operation] = []

        def visit(inner: ir.Operation) -> ir.WalkResult:
            if inner.name == "gpu.launch":
                launches.append(inner)
            return ir.WalkResult.ADVANCE

        op.walk(visit, ir.WalkOrder.PRE_ORDER)
        try:
            for launch in launches:
                check_alignment(launch, op)
                lower_async_copies(launch)
                self._check(launch)
            if self.profile and launches:
                declare_profile(op)
            for site, launch in enumerate(launches):
                if self.profile:
                    instrument(launch, site * 1000)
                if collectives(launch):
                    _emulate_lockstep(launch)
                else:
                    self._emulate(launch)
        except Refusal as refused:
            refused.op.location.emit_error(f"{self.NAME}: {refused.message}")
            pass_.signal_pass_failure()

    @staticmethod
    def _check(launch: ir.Operation) -> None:
        view = launch.opview
        if len(launch.results) or len(view.asyncDependencies):
            raise Refusal(launch, "asynchronous launches are not emulated")
        if len(launch.regions[0].blocks) != 1:
            raise Refusal(launch, "a launch body with several blocks is not emulated")
        if len(launch.regions[0].blocks[0].arguments) != 12 + shared.attributions(launch):
            raise Refusal(launch, "launches with private memory attributions are not emulated")
        shared.check(launch)

        waiting: list[ir.Operation] = []

        def visit(inner: ir.Operation) -> ir.WalkResult:
            if inner.name in _UNSUPPORTED:
                waiting.append(inner)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        launch.walk(visit)
        if waiting:
            raise Refusal(
                waiting[0],
                f"'{waiting[0].name}' makes threads wait for each other; the emulation "
                "runs them one after the other and does not support it yet",
            )

    @staticmethod
    def _emulate(launch: ir.Operation) -> None:
        view = launch.opview
        grid = [view.gridSizeX, view.gridSizeY, view.gridSizeZ]
        block = [view.blockSizeX, view.blockSizeY, view.blockSizeZ]
        body = launch.regions[0].blocks[0]
        with ir.InsertionPoint(launch), launch.location:
            zero = arith.constant(ir.IndexType.get(), 0)
            one = arith.constant(ir.IndexType.get(), 1)
        ids: list[ir.Value | None] = [None] * 6
        loops: list[scf.ForOp] = []
        at = ir.InsertionPoint(launch)
        # Outermost first: grid z, y, x, then block z, y, x.
        for slot, bound in ((2, grid[2]), (1, grid[1]), (0, grid[0]),
                            (5, block[2]), (4, block[1]), (3, block[0])):  # fmt: skip
            with at, launch.location:
                loop = scf.ForOp(zero, bound, one)
                with ir.InsertionPoint(loop.body):
                    scf.YieldOp([])
            ids[slot] = loop.induction_variable
            loops.append(loop)
            at = ir.InsertionPoint.at_block_terminator(loop.body)
        values = [*ids, *grid, *block]
        innermost = loops[-1].body
        terminator = innermost.operations[len(innermost.operations) - 1]
        block_end = list(loops[2].body.operations)[-1].operation  # a block: after its threads
        shared.per_block(
            launch, ir.InsertionPoint(loops[3].operation), ir.InsertionPoint(block_end)
        )
        for arg, value in zip(list(body.arguments)[:12], values, strict=True):
            assert value is not None
            arg.replace_all_uses_with(value)
        for inner in list(body.operations):
            inner = inner.operation
            if inner.name == "gpu.terminator":
                continue
            inner.move_before(terminator)
        # Id and size ops the body reads directly.
        for inner in _id_ops(loops[0].operation):
            which = str(inner.attributes["dimension"]).split()[-1].rstrip(">")  # #gpu<dim x>
            inner.results[0].replace_all_uses_with(values[_ID_OPS[inner.name] + _DIMS[which]])
            inner.erase()
        launch.erase()


def _id_ops(root: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _ID_OPS:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _warp_op(state: Lockstep, op: ir.Operation) -> None:
    """A warp collective for every warp of the group: a shuffle, an MMA or a warp barrier."""
    if op.name == "nvvm.bar.warp.sync":
        return  # the phase boundary is all it is
    if op.name == "gpu.shuffle":
        emulate_shuffle(state, op)
    else:
        emulate_mma(state, op)


def _emulate_lockstep(launch: ir.Operation) -> None:
    """Loops over blocks, then over warps (or once per block if it has barriers), in phases."""
    view = launch.opview
    grid = [view.gridSizeX, view.gridSizeY, view.gridSizeZ]
    block = [view.blockSizeX, view.blockSizeY, view.blockSizeZ]
    body = launch.regions[0].blocks[0]
    args = list(body.arguments)
    for inner in _id_ops(launch):
        which = str(inner.attributes["dimension"]).split()[-1].rstrip(">")  # #gpu<dim x>
        inner.results[0].replace_all_uses_with(args[_ID_OPS[inner.name] + _DIMS[which]])
        inner.erase()
    blockwide = any(op.name in BLOCK_COLLECTIVES for op in collectives(launch))
    index = ir.IndexType.get()
    with ir.InsertionPoint(launch), launch.location:
        zero, one, warp = (arith.constant(index, v) for v in (0, 1, 32))
        threads = arith.muli(arith.muli(block[0], block[1]), block[2])
        group = threads if blockwide else warp
        groups = one if blockwide else arith.ceildivsi(threads, warp)
        outermost = scf.ForOp(zero, grid[2], one)
    loops = [outermost]
    for bound in (grid[1], grid[0], groups):
        with ir.InsertionPoint(loops[-1].body), launch.location:
            loops.append(scf.ForOp(zero, bound, one))
    for loop in loops:
        with ir.InsertionPoint(loop.body), launch.location:
            scf.YieldOp([])
    terminator = list(loops[-1].body.operations)[-1].operation
    block_end = list(loops[2].body.operations)[-1].operation
    shared.per_block(launch, ir.InsertionPoint(loops[3].operation), ir.InsertionPoint(block_end))
    with ir.InsertionPoint(terminator), launch.location:
        index_in_block = loops[-1].induction_variable
        left = arith.subi(threads, arith.muli(index_in_block, warp))
        lanes = threads if blockwide else arith.minsi(left, warp)
    state = Lockstep(ir.InsertionPoint(outermost.operation), group, lanes, index_in_block,
                     args[3:6], block, _warp_op, blockwide)  # fmt: skip
    with launch.location:
        state.run([o.operation for o in body.operations][:-1], ir.InsertionPoint(terminator))
    state.erase_dead()
    block_ids = [loops[2].induction_variable, loops[1].induction_variable,
                 loops[0].induction_variable]  # fmt: skip
    for arg, value in zip(args[:3] + args[6:12], block_ids + grid + block, strict=True):
        arg.replace_all_uses_with(value)
    launch.erase()
