"""Pass ``sparse-iter-omp-schedule``."""

from __future__ import annotations

import dataclasses
from typing import Literal

from mlir import ir
from mlir.dialects import arith, func
from mlir.passmanager import ExternalPass

from sparsecomp.errors import TargetError
from sparsecomp.ir.targets import enclosing_function, function_target
from sparsecomp.ir.walk import rebuild
from sparsecomp.targets import CpuTarget
from sparsecomp.transforms.base import SparsecompPass

Schedule = Literal["static", "dynamic", "guided", "auto", "runtime"]
#: Operand segments of the optional operands this pass adds (MLIR 22 ODS order):
#: omp.wsloop: allocate, allocator, linear, linear_step, private, reduction, chunk;
#: omp.parallel: allocate, allocator, if_expr, num_threads, private, reduction.
_CHUNK_SEGMENT = 6
_IF_SEGMENT = 2
_THREADS_SEGMENT = 3
_SEGMENTS = "operandSegmentSizes"
#: Adaptive chunks: about this many per thread, and at most this many rows each.
CHUNKS_PER_THREAD = 8
MAX_CHUNK = 256
TEAM_SIZE = "omp_get_num_threads"  # libomp's, called inside the parallel region


def _ops_named(root: ir.Operation, name: str) -> list[ir.Operation]:
    """Ops called ``name`` in ``root``, not looking into ``llvm.func`` (lowered already)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.func":
            return ir.WalkResult.SKIP
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _segment_size(op: ir.Operation, segment: int) -> int:
    return list(ir.DenseI32ArrayAttr(op.attributes[_SEGMENTS]))[segment]


def _i32(value: int, op: ir.Operation) -> ir.Value:
    """An ``arith.constant value : i32`` just before ``op``."""
    with ir.InsertionPoint(op), op.location:
        return arith.constant(ir.IntegerType.get_signless(32), value)


def _adaptive_chunk(loop: ir.Operation) -> ir.Value | None:
    """``clamp(ceil(trips / (CHUNKS_PER_THREAD * team size)), 1, MAX_CHUNK)`` before ``loop``.

    None when the loop nest is not one loop (no single trip count).
    """
    nest = loop.regions[0].blocks[0].operations[0].operation
    if nest.name != "omp.loop_nest" or len(nest.operands) != 3:
        return None
    if "loop_inclusive" in nest.attributes:  # never from convert-scf-to-openmp
        return None
    lower, upper, step = nest.operands
    index, i32 = ir.IndexType.get(), ir.IntegerType.get_signless(32)
    # At most MAX_CHUNK rows: a loop over tiles of rows (a constant step) takes fewer.
    most = MAX_CHUNK // max(_constant(step) or 1, 1) or 1
    with ir.InsertionPoint(loop), loop.location:
        team = func.call([i32], ir.FlatSymbolRefAttr.get(TEAM_SIZE), [])
        per = arith.muli(arith.index_cast(index, team), arith.constant(index, CHUNKS_PER_THREAD))
        trips = arith.ceildivsi(arith.subi(upper, lower), step)
        chunk = arith.maxsi(arith.ceildivsi(trips, per), arith.constant(index, 1))
        chunk = arith.minsi(chunk, arith.constant(index, most))
        return arith.index_cast(i32, chunk)


def _constant(value: ir.Value) -> int | None:
    """The value of an ``arith.constant`` integer, else None."""
    op = value.owner
    if isinstance(op, ir.Block) or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _inside(value: ir.Value, region: ir.Operation) -> bool:
    """Whether ``value`` is defined inside ``region`` (an op with regions)."""
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        if op == region:
            return True
        op = op.parent
    return False


def _enough_trips(region: ir.Operation, least: int) -> ir.Value | None:
    """``trips >= least`` (i1) before ``region``, for its one worksharing loop; None when it
    has several, a nest of several loops, or bounds computed inside it, or when its
    iterations allocate (each packs a panel of its own, see ``NestEmitter.panels``:
    a few iterations are the whole work)."""
    loops = _ops_named(region, "omp.wsloop")
    if len(loops) != 1 or _ops_named(region, "memref.alloc"):
        return None
    nest = loops[0].regions[0].blocks[0].operations[0].operation
    if nest.name != "omp.loop_nest" or len(nest.operands) != 3:
        return None
    if "loop_inclusive" in nest.attributes or any(_inside(v, region) for v in nest.operands):
        return None
    lower, upper, step = nest.operands
    index = ir.IndexType.get()
    with ir.InsertionPoint(region), region.location:
        trips = arith.ceildivsi(arith.subi(upper, lower), step)
        return arith.cmpi(arith.CmpIPredicate.sge, trips, arith.constant(index, least))


def _declare_team_size(module: ir.Operation) -> None:
    """``func.func private @omp_get_num_threads() -> i32`` unless the module has it."""
    body = module.regions[0].blocks[0]
    if TEAM_SIZE in ir.SymbolTable(module):
        return
    with ir.InsertionPoint.at_block_begin(body), module.location:
        decl = func.FuncOp(TEAM_SIZE, ([], [ir.IntegerType.get_signless(32)]))
        decl.sym_visibility = ir.StringAttr.get("private")


def with_operand(op: ir.Operation, segment: int, value: ir.Value) -> ir.Operation:
    """``op`` rebuilt with ``value`` as its optional operand ``segment`` (regions moved)."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes[_SEGMENTS]))
    operands = list(op.operands)
    start = sum(sizes[:segment])
    operands[start : start + sizes[segment]] = [value]
    sizes[segment] = 1
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes[_SEGMENTS] = ir.DenseI32ArrayAttr.get(sizes)
    return rebuild(op, operands, [r.type for r in op.results], attributes)


@dataclasses.dataclass(frozen=True)
class OmpSchedulePass(SparsecompPass):
    """Set the schedule and thread count of OpenMP worksharing loops.

    Runs after ``convert-scf-to-openmp``. Every ``omp.wsloop`` without a
    schedule gets ``schedule(<schedule>[, chunk])``. Rows of power-law
    matrices differ wildly in length, so equal blocks of rows (``static``)
    can leave threads idle, and on a shared machine a descheduled thread
    holds up its whole block; ``dynamic`` hands out chunks on demand. The
    chunk is ``chunk`` when > 0 (an ``i32`` constant just before the loop);
    with ``chunk = 0`` (the default), dynamic and guided loops get
    ``clamp(ceil(trips / (8 * team size)), 1, 256 / step)`` iterations (at
    most 256 rows: a loop over tiles of 64 rows, a constant step of 64,
    gets at most 4 tiles; a step that is not a constant counts as 1), computed
    at run time (team size from libomp's ``omp_get_num_threads``, declared
    in the module), and the other schedules no chunk.

    Every ``omp.parallel`` without ``num_threads`` gets ``num_threads(N)``:
    N = ``threads`` when > 0; with ``threads = -1`` (the default), the
    ``threads`` of the enclosing function's CPU target (``sparse_iter.target``
    / ``sparse_iter.targets``, else the host's cores), where 0 means no
    clause: libomp picks (``OMP_NUM_THREADS``, else all cores); ``threads =
    0`` never adds one. Loops and regions that already have a schedule or a
    thread count are left alone, as is everything outside OpenMP.

    An ``omp.parallel`` around one worksharing loop of fewer than
    ``serial_below`` iterations (default 32) runs on the calling thread: it
    gets ``if(trips >= serial_below)``, computed before the region. Waking
    the team and joining it costs microseconds, more than the whole of a
    10-row SpMM (a 10x10 call: 25 us with two threads, 15 us with one).
    A loop whose iterations allocate a buffer (each packs its own panel of
    an operand) is left parallel: its few iterations are the whole nest.

    Options: ``schedule`` (static, dynamic, guided, auto or runtime; default
    dynamic), ``chunk`` (>= 0; not allowed with auto or runtime),
    ``threads`` (>= -1), ``serial-below`` (>= 0; 0: never serial).

    Error: ``threads = -1`` in a function whose target cannot be told (the
    module names several targets and the function none).

    Before:

    ```mlir
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) { ... }
      }
      omp.terminator
    }
    ```

    After (``schedule=dynamic chunk=64 threads=2``):

    ```mlir
    %nt = arith.constant 2 : i32
    %trips = arith.ceildivsi ...
    %enough = arith.cmpi sge, %trips, %c32 : index
    omp.parallel if(%enough) num_threads(%nt : i32) {
      %chunk = arith.constant 64 : i32
      omp.wsloop schedule(dynamic = %chunk : i32) {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) { ... }
      }
      omp.terminator
    }
    ```
    """

    NAME = "sparse-iter-omp-schedule"
    schedule: Schedule = "dynamic"
    chunk: int = 0
    threads: int = -1
    serial_below: int = 32

    def __post_init__(self) -> None:
        if self.chunk < 0:
            raise ValueError(f"chunk must be >= 0 (0: the runtime's default), got {self.chunk}")
        if self.chunk and self.schedule in ("auto", "runtime"):
            raise ValueError(f"schedule {self.schedule} takes no chunk, got chunk={self.chunk}")
        if self.threads < -1:
            raise ValueError(f"threads must be >= -1 (-1: the target's), got {self.threads}")
        if self.serial_below < 0:
            raise ValueError(f"serial-below must be >= 0 (0: off), got {self.serial_below}")

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        kind = ir.Attribute.parse(f"#omp<schedulekind {self.schedule}>")
        adaptive = self.chunk == 0 and self.schedule in ("dynamic", "guided")
        for loop in _ops_named(op, "omp.wsloop"):
            if "schedule_kind" in loop.attributes:
                continue
            loop.attributes["schedule_kind"] = kind
            if _segment_size(loop, _CHUNK_SEGMENT):
                continue
            chunk = _adaptive_chunk(loop) if adaptive else None
            if adaptive and chunk is None:
                chunk = _i32(MAX_CHUNK, loop)
            elif self.chunk:
                chunk = _i32(self.chunk, loop)
            if chunk is not None:
                with_operand(loop, _CHUNK_SEGMENT, chunk)
        if adaptive and _ops_named(op, "omp.wsloop"):
            _declare_team_size(op)
        for region in _ops_named(op, "omp.parallel"):
            if _segment_size(region, _THREADS_SEGMENT):
                continue
            try:
                threads = self._threads(region)
            except TargetError as err:
                region.location.emit_error(f"sparse-iter-omp-schedule: {err}")
                pass_.signal_pass_failure()
                return
            if threads:
                region = with_operand(region, _THREADS_SEGMENT, _i32(threads, region))
            if self.serial_below > 0 and not _segment_size(region, _IF_SEGMENT):
                enough = _enough_trips(region, self.serial_below)
                if enough is not None:
                    with_operand(region, _IF_SEGMENT, enough)

    def _threads(self, region: ir.Operation) -> int:
        """The thread count for ``region`` (0: none)."""
        if self.threads >= 0:
            return self.threads
        func = enclosing_function(region)
        if func is None:
            return 0
        target = function_target(func)
        return target.threads if isinstance(target, CpuTarget) else 0
