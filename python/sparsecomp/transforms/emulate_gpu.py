"""Pass ``sparse-iter-emulate-gpu``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, func, memref, scf
from mlir.passmanager import ExternalPass

from sparsecomp.transforms.base import SparsecompPass

#: Ops whose meaning needs threads that run together; not emulated yet.
_UNSUPPORTED = ("gpu.barrier", "gpu.shuffle", "gpu.subgroup_reduce", "gpu.all_reduce")
#: Id and size ops inside a launch body -> index into the body's arguments
#: (block ids 0-2, thread ids 3-5, grid sizes 6-8, block sizes 9-11).
_ID_OPS = {"gpu.block_id": 0, "gpu.thread_id": 3, "gpu.grid_dim": 6, "gpu.block_dim": 9}
_DIMS = {"x": 0, "y": 1, "z": 2}
#: What ``profile=true`` adds to the module: a hook the runtime points at its
#: recorder (null: record nothing) and the function every access calls.
HOOK = "sparsecomp_emu_hook"
ACCESS = "sparsecomp_emu_access"
_PROFILE_DECLS = f"""
llvm.mlir.global external @{HOOK}() {{addr_space = 0 : i32}} : !llvm.ptr {{
  %0 = llvm.mlir.zero : !llvm.ptr
  llvm.return %0 : !llvm.ptr
}}
func.func private @{ACCESS}(%site: i64, %addr: i64, %bytes: i64, %block: i64, %thread: i64,
                            %store: i64) {{
  %g = llvm.mlir.addressof @{HOOK} : !llvm.ptr
  %fp = llvm.load %g : !llvm.ptr -> !llvm.ptr
  %null = llvm.mlir.zero : !llvm.ptr
  %set = llvm.icmp "ne" %fp, %null : !llvm.ptr
  scf.if %set {{
    llvm.call %fp(%site, %addr, %bytes, %block, %thread, %store)
        : !llvm.ptr, (i64, i64, i64, i64, i64, i64) -> ()
  }}
  return
}}
"""


class _Refused(Exception):
    def __init__(self, op: ir.Operation, message: str) -> None:
        super().__init__(message)
        self.op, self.message = op, message


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

    Kernels that synchronize (``gpu.barrier``, shuffles, block reductions)
    or use workgroup memory are refused at the op: running their threads in
    sequence would not be faithful.

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
                self._check(launch)
            if self.profile and launches:
                _declare_profile(op)
            for site, launch in enumerate(launches):
                if self.profile:
                    _instrument(launch, site * 1000)
                self._emulate(launch)
        except _Refused as refused:
            refused.op.location.emit_error(f"{self.NAME}: {refused.message}")
            pass_.signal_pass_failure()

    @staticmethod
    def _check(launch: ir.Operation) -> None:
        view = launch.opview
        if len(launch.results) or len(view.asyncDependencies):
            raise _Refused(launch, "asynchronous launches are not emulated")
        if len(launch.regions[0].blocks) != 1:
            raise _Refused(launch, "a launch body with several blocks is not emulated")
        if len(launch.regions[0].blocks[0].arguments) != 12:
            raise _Refused(launch, "launches with workgroup or private memory are not emulated")

        waiting: list[ir.Operation] = []

        def visit(inner: ir.Operation) -> ir.WalkResult:
            if inner.name in _UNSUPPORTED:
                waiting.append(inner)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        launch.walk(visit)
        if waiting:
            raise _Refused(
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
        for arg, value in zip(body.arguments, values, strict=True):
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


def _declare_profile(module: ir.Operation) -> None:
    """Add the hook global and the access function to ``module`` (once)."""
    body = module.regions[0].blocks[0]
    if ACCESS in ir.SymbolTable(module):
        return
    decls = ir.Module.parse(_PROFILE_DECLS, context=module.context)
    first = body.operations[0].operation
    for decl in list(decls.body.operations):
        decl.operation.move_before(first)


def _i64(value: ir.Value) -> ir.Value:
    return arith.index_cast(ir.IntegerType.get_signless(64), value)


def _element_bytes(ty: ir.Type) -> int:
    element = ir.MemRefType(ty).element_type
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.ComplexType):
        return 2 * ir.FloatType(ir.ComplexType(element).element_type).width // 8
    return max(1, element.width // 8)


def _instrument(launch: ir.Operation, first_site: int) -> None:
    """Before every global load and store of the launch body, report the access."""
    body = launch.regions[0].blocks[0]
    args = list(body.arguments)
    bx, by, bz, tx, ty, tz, gx, gy, _gz, sx, sy, _sz = args
    with ir.InsertionPoint.at_block_begin(body), launch.location:
        block = _i64(arith.addi(bx, arith.muli(gx, arith.addi(by, arith.muli(gy, bz)))))
        thread = _i64(arith.addi(tx, arith.muli(sx, arith.addi(ty, arith.muli(sy, tz)))))
    accesses: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("memref.load", "memref.store"):
            accesses.append(op)
        return ir.WalkResult.ADVANCE

    launch.walk(visit)
    for site, access in enumerate(accesses, start=first_site):
        store = access.name == "memref.store"
        memref_value = access.operands[1 if store else 0]
        indices = list(access.operands[2 if store else 1 :])
        ty = ir.MemRefType(memref_value.type)
        if ty.memory_space is not None:
            continue  # workgroup or private memory: not global traffic
        with ir.InsertionPoint(access), access.location:
            index = ir.IndexType.get()
            pointer = memref.extract_aligned_pointer_as_index(memref_value)
            meta = memref.ExtractStridedMetadataOp(memref_value)
            rank = ty.rank
            linear = meta.results[1]
            for k, i in enumerate(indices):
                linear = arith.addi(linear, arith.muli(i, meta.results[2 + rank + k]))
            size = _element_bytes(memref_value.type)
            address = arith.addi(pointer, arith.muli(linear, arith.constant(index, size)))
            i64 = ir.IntegerType.get_signless(64)
            func.call([], ACCESS, [arith.constant(i64, site), _i64(address),
                                   arith.constant(i64, size), block, thread,
                                   arith.constant(i64, int(store))])  # fmt: skip
