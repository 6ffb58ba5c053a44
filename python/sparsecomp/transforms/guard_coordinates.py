"""Pass ``sparse-iter-guard-coordinates``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mlir import ir
from mlir.dialects import arith, memref, scf, vector
from mlir.passmanager import ExternalPass

from sparsecomp.formats.names import layout_from_attr
from sparsecomp.formats.scipyio import compressed_kind
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms._carry import CarryError, boolean, carry_out
from sparsecomp.transforms.base import SparsecompPass

#: Function attribute: the (ABI) arguments whose coordinates the kernel must guard.
GUARD = "sparse_iter.guard"
#: ABI key: the function takes a trailing ``memref<1xi32>`` status word.
STATUS = "status"
_ABI = "sparse_iter.abi"
_PARALLEL = "sparse_iter.parallel"
#: Ops that give another view of a buffer: reads through them read the buffer.
_VIEWS = ("memref.subview", "memref.cast", "memref.reinterpret_cast",
          "memref.collapse_shape", "memref.expand_shape")  # fmt: skip
#: Ops that read elements: their integer results are the coordinates read.
_READS = ("memref.load", "vector.load", "vector.transfer_read", "vector.gather",
          "vector.maskedload")  # fmt: skip
#: Ops that only read a buffer's sizes and strides.
_METADATA = (
    "memref.dim",
    "memref.extract_strided_metadata",
    "memref.extract_aligned_pointer_as_index",
)
_ULT, _UGE = 6, 9  # arith::CmpIPredicate
#: Coordinates a tile of rows holds, about (8 KiB of 32-bit ones: in the core's L1
#: cache still when its rows are done and the tile scans them).
TILE_ENTRIES = 2048
#: Tiles a parallel loop has at least (where it has that many rows), for load balance.
MIN_TILES = 64
#: Rows a tile holds at most.
MAX_TILE_ROWS = 1024
#: Lanes of a tile's scan (LLVM splits them into the target's vectors).
SCAN_LANES = 16
_ORI = 14  # arith::AtomicRMWKind::ori


class _Refused(Exception):
    def __init__(self, op: ir.Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


@dataclasses.dataclass(frozen=True)
class GuardCoordinatesPass(SparsecompPass):
    """Check every coordinate a kernel reads from a caller's buffer, and report any
    out of range through a status word, so that the runtime need not.

    A scipy CSR (CSC) matrix reaches a kernel with its own arrays, which the
    caller may change between calls: the runtime checked every index against
    the column (row) count on every call, one more pass over memory than the
    kernel's (a third of SpMV's traffic). A function whose attribute
    ``sparse_iter.guard`` names sparse arguments (ABI positions; a ``csr`` or
    ``csc`` layout each) checks them itself, each read (``memref.load``,
    vector reads, reads through views) in one of three ways:

    1. **Rows, scanned by their tile first.** A load at the induction
       variable of a loop from ``pos[i]`` to ``pos[i + 1]`` (or within them:
       from ``max(x, pos[i])`` to ``min(y, pos[i + 1])``, a row of a sliced
       nest, ``lowering/slices.py``), ``i`` that of the ``sparse_iter.parallel``
       loop (step 1, no ``memref.alloca`` inside, whose stack an iteration
       releases), in a loop with no region ops and no vector values that
       writes no memory (SpMV's rows, which LLVM vectorizes over their
       entries): the parallel loop goes by tiles of rows, and each tile
       first takes the unsigned max of its rows' coordinates (``pos[t]`` to
       ``pos[t_end]``: vectors of ``SCAN_LANES``, the last one a masked
       load; the rows then read them from the core's L1 cache). Where one
       is out of range it sets the status word and skips its rows; else its
       rows run as they are, their reads unchanged. A tile holds about
       ``TILE_ENTRIES`` coordinates (its row count is computed at run time
       from the loop's mean row length, at least ``MIN_TILES`` tiles where
       there are as many rows).
    2. **Scanned first.** A load at the induction variable of an ``scf.for``
       whose body writes memory or holds region ops (SpGEMM's scatter into a
       row workspace: a loop LLVM does not vectorize, where a check per read
       lengthens every iteration): before the loop, an unsigned max over the
       coordinates it will read (a loop LLVM vectorizes, over memory the loop
       then reads from cache), and the loop runs only if that is in range.
    3. **Clamped and flagged.** Any other read (SpMM's rows among them): an unsigned
       compare follows it, its value is replaced by 0 where out of range, and "out
       of range" is or-ed through the enclosing ``scf.for`` (``iter_args``),
       ``scf.if`` and ``scf.while`` ops up to the ``sparse_iter.parallel`` loop's
       body (else the function's), where ``memref.atomic_rmw ori`` sets the status
       word when it is true: one conditional atomic per iteration of the parallel
       loop, none in inner loops.

    Way 1 first clamped each coordinate (``arith.minui``) and scanned the tile
    after its rows. On a 2-core Zen 4 EPYC, where ``sparse-iter-gather-lanes``
    then reads a row 8 entries at a time, LLVM's SLP vectorizer put the 8 clamps
    into a vector and took each lane out again (two instructions a lane), and
    SpMV with a scipy operand took 1.3-1.7x the time of the same matrix as a
    ``SparseTensor`` (no checks). Scanned first, unclamped (the best of three
    alternating runs, ms): bcsstk16 0.076 -> 0.051, bcsstk13 0.025 -> 0.018,
    ca-HepPh 0.070 -> 0.055, email-Enron 0.120 -> 0.098, wiki-Vote 0.035 ->
    0.027 (1.14-1.22x the unchecked kernel now); rajat01 and 4elt (rows of 6-7,
    no lanes) level at 1.34x; the matrices larger than the caches (R-MAT 2^16,
    the 48^3 FEM stencil, uniform 0.1% of 32768^2, the 2^18-row band) level or
    up to 10% faster, the scan's reads bringing in what the rows read next.
    Earlier, on a 2-core Xeon, interleaved in one process, SpMV with a scipy
    operand over the same variant without checks: rows clamped and checked by
    their tiles after them, 1.05-1.10x on FEM matrices, the band, graphs, 2:4,
    R-MAT and the uniform matrices alike; the
    compare and flag of way 3 in the row loop 1.2-1.4x where rows are short (FEM,
    the band, 4elt, memplus: SpMV there is bound by the core's instruction
    throughput, and the flag is reduced at the end of every row), 1.0-1.05x on R-MAT
    and the uniform matrices (bound by the latency of their gathers). SpMM's rows
    (vectors over ``K`` per entry) hide the compare: there the tiles measured 3-8%
    slower than way 3, which they keep. Tiles of 64 rows, whatever their length,
    took 1.15-1.28x on long rows (a tile's coordinates outgrew L1); a scan of all
    the rows before any, 1.2-1.4x (its loads took the memory stalls that the rows' loads had
    hidden); SpGEMM's scatter loops clamped 1.3-1.5x, scanned first 1.1-1.25x.

    The level size is clamped to the coordinate type's largest value + 1, so
    that a negative coordinate (unsigned: above it) fails too. The function
    takes the status word as a new last argument, ``memref<1xi32>``, and its
    ABI says ``"status": true`` and ``"guarded": true`` on each such argument:
    the runtime passes a zeroed word and, where it comes back set, checks the
    arguments itself and raises the error it finds; the results are dropped.
    Positions are checked by the runtime (O(rows), not O(entries)): the reads'
    ranges and the tiles' scans come from them, and a level size of 0 with
    entries is refused there (clamped reads would read element 0).

    Runs on bufferized functions, before ``sparse-iter-parallelize``. An
    argument whose coordinates go anywhere else (a copy into a result, as
    SDDMM's, a call) is left as it is, with ``"guarded": false`` in the ABI:
    the runtime keeps checking it. Reads inside other region ops than those
    above are an error.

    Before:

    ```mlir
    func.func @spmv(%pos: memref<?xi32>, %crd: memref<?xi32>, ..., %cols: index, ...)
        attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "..."} {
      scf.for %i = %c0 to %rows step %c1 {
        ...
        %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
          %j = memref.load %crd[%p] : memref<?xi32>
          ...
      } {sparse_iter.parallel}
    ```

    After (rows scanned by their tiles first):

    ```mlir
    func.func @spmv(..., %status: memref<1xi32>) attributes {sparse_iter.abi = "..."} {
      %tile = ... : index  // rows per tile, from pos[rows] - pos[0]
      scf.for %t = %c0 to %rows step %tile {
        %end = arith.minui %t_plus_tile, %rows : index
        %max = scf.for %q = %first to %full step %c16 iter_args(%m = %zeros) -> (vector<16xi32>) {
          %v = vector.load %crd[%q] : memref<?xi32>, vector<16xi32>
          ...
        }
        ... (the last vector masked; vector.reduction <maxui>)
        %bad = arith.cmpi uge, %top_read, %limit : i32
        scf.if %bad {
          %old = memref.atomic_rmw ori %c1_i32, %status[%c0] : (i32, memref<1xi32>) -> i32
        } else {
          scf.for %i = %t to %end step %c1 {
            ... (the rows as they were)
          }
        }
      } {sparse_iter.parallel}
    ```
    """

    NAME = "sparse-iter-guard-coordinates"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        ok = True
        for func in [o for o in preorder(op) if o.name == "func.func"]:
            if GUARD not in func.attributes:
                continue
            try:
                with func.location:
                    _guard(func)
            except _Refused as err:
                err.op.location.emit_error(f"{self.NAME}: {err}")
                ok = False
        if not ok:
            pass_.signal_pass_failure()


def _guard(func: ir.Operation) -> None:
    if _ABI not in func.attributes or len(func.regions[0].blocks) != 1:
        raise _Refused(func, f"'{GUARD}' needs a public function of one block with an ABI")
    abi = json.loads(ir.StringAttr(func.attributes[_ABI]).value)
    guards = _guards(func, abi)
    del func.attributes[GUARD]
    if guards:
        abi[STATUS] = True
    func.attributes[_ABI] = ir.StringAttr.get(json.dumps(abi, separators=(",", ":")))
    if not guards:
        return
    status = _add_status(func)
    for rows, tiled in _tiles(guards).items():
        _tile(rows, tiled, status)
    for guard in guards:
        for read in guard.reads:
            _guard_read(read, guard.limit, status)


def _guards(func: ir.Operation, abi: dict[str, Any]) -> list[_Guard]:
    """The arguments ``sparse_iter.guard`` names, with the reads of their coordinates;
    each one's ABI entry says whether it is guarded (not where its coordinates go
    elsewhere than into reads)."""
    entry = func.regions[0].blocks[0]
    guards = []
    for argument in [int(i) for i in ir.DenseI64ArrayAttr(func.attributes[GUARD])]:
        pos, crd, bound = _buffers(func, abi["args"], argument)
        buffer = entry.arguments[crd]
        reads = _reads(buffer)
        abi["args"][argument]["guarded"] = reads is not None
        if reads is None:
            continue  # the runtime keeps checking this argument
        ty = ir.IntegerType(ir.MemRefType(buffer.type).element_type)
        with ir.InsertionPoint.at_block_begin(entry), func.location:
            limit = _limit(entry.arguments[bound], ty)
        guards.append(_Guard(entry.arguments[pos], buffer, limit, reads))
    return guards


def _guard_read(read: ir.Operation, limit: ir.Value, status: ir.Value) -> None:
    """Guard one read (see the pass): its loop's range scanned first where the loop
    writes memory or holds regions, else the read clamped in place."""
    loc = read.location
    with loc:
        if _scannable(read) and not _straight(read.parent.operation):
            bad, block = _prescan(read, limit)
        else:
            with ir.InsertionPoint(_next(read)):
                bad = _clamp(read, limit)
            block = read.block
        _report(bad, block, status, loc)


#: Ops that write memory: a loop holding one is not one LLVM vectorizes whole.
_WRITES = ("memref.store", "memref.atomic_rmw", "vector.store", "vector.transfer_write",
           "vector.scatter", "vector.maskedstore", "memref.copy")  # fmt: skip


def _straight(loop: ir.Operation) -> bool:
    """Whether ``loop``'s body has no region ops and writes no memory: a loop the
    vectorizer takes whole, where a clamp and an ``or`` per read cost two vector
    instructions."""
    for op in loop.regions[0].blocks[0].operations:
        if len(op.regions) or op.name in _WRITES:
            return False
    return True


def _scalar(loop: ir.Operation) -> bool:
    """Whether ``loop`` is straight (:func:`_straight`) and holds no vector values: a
    loop over a row's entries that LLVM vectorizes (SpMV's), where a compare and a
    flag reduced at the row's end cost more than the clamp and the tile's scan. (SpMM's
    rows, vectors over ``K`` per entry, hide the compare; there the scan cost more.)"""
    if not _straight(loop):
        return False
    for op in loop.regions[0].blocks[0].operations:
        values = [*op.operands, *op.results]
        if any(isinstance(v.type, ir.VectorType) for v in values):
            return False
    return True


def _add_status(func: ir.Operation) -> ir.Value:
    """A new last argument of ``func``: its status word, ``memref<1xi32>``."""
    entry = func.regions[0].blocks[0]
    status = entry.add_argument(
        ir.MemRefType.get([1], ir.IntegerType.get_signless(32)), func.location
    )
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([*fty.inputs, status.type], fty.results)
    )
    if "arg_attrs" in func.attributes:
        attrs = [*ir.ArrayAttr(func.attributes["arg_attrs"]), ir.DictAttr.get({})]
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)
    return status


@dataclasses.dataclass
class _Guard:
    """One guarded argument: its positions and coordinates, the coordinates' limit
    and the reads of them that no tile covers (yet)."""

    positions: ir.Value
    coordinates: ir.Value
    limit: ir.Value
    reads: list[ir.Operation]


def _tiles(guards: list[_Guard]) -> dict[ir.Operation, list[_Guard]]:
    """Parallel loops over rows -> the guards whose rows they read in scalar loops
    (:func:`_scalar`); those reads leave ``reads``: the tiles check them."""
    tiles: dict[ir.Operation, list[_Guard]] = {}
    for guard in guards:
        for read in list(guard.reads):
            rows = _row_loop(read, guard)
            if rows is None or not _scalar(read.parent.operation):
                continue
            tiled = tiles.setdefault(rows, [])
            if guard not in tiled:
                tiled.append(guard)
            guard.reads.remove(read)
    return tiles


def _row_loop(read: ir.Operation, guard: _Guard) -> ir.Operation | None:
    """The parallel loop whose row ``read`` reads a coordinate of: ``read`` loads at the
    induction variable of a loop from ``pos[i]`` to ``pos[i + 1]`` (or from ``max(x,
    pos[i])`` to ``min(y, pos[i + 1])``, a row of a sliced nest, ``lowering/slices.py``),
    ``i`` the induction variable of the parallel loop (step 1, no ``memref.alloca``
    inside: an iteration releases its stack, and a tile would hold all its rows' worth).
    None for other reads."""
    if not _scannable(read) or read.operands[0] != guard.coordinates:
        return None
    rows = _parallel_loop(read)
    if rows is None or not _is_one(rows.operands[2]) or len(rows.results) or _allocates(rows):
        return None
    row = rows.regions[0].blocks[0].arguments[0]
    loop = read.parent
    lower = _loaded_from(_within(loop.operands[0], "arith.maxui", guard), guard.positions)
    upper = _loaded_from(_within(loop.operands[1], "arith.minui", guard), guard.positions)
    if lower != row or upper is None or not _is_next(upper, row):
        return None
    return rows


def _parallel_loop(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.for" and _PARALLEL in parent.attributes:
            return parent.operation
        parent = parent.parent
    return None


def _loaded_from(value: ir.Value, buffer: ir.Value) -> ir.Value | None:
    """The index ``value`` was loaded from ``buffer`` at (through casts), or None."""
    op = value.owner
    if isinstance(op, ir.Block):
        return None
    if op.name in ("arith.index_cast", "arith.index_castui"):
        return _loaded_from(op.operands[0], buffer)
    if op.name == "memref.load" and len(op.operands) == 2 and op.operands[0] == buffer:
        return op.operands[1]
    return None


def _is_next(value: ir.Value, of: ir.Value) -> bool:
    """Whether ``value`` is ``of + 1``."""
    op = value.owner
    if isinstance(op, ir.Block) or op.name != "arith.addi":
        return False
    a, b = op.operands
    return (a == of and _is_one(b)) or (b == of and _is_one(a))


def _is_one(value: ir.Value) -> bool:
    op = value.owner
    if isinstance(op, ir.Block) or op.name != "arith.constant":
        return False
    attr = op.attributes["value"]
    return isinstance(attr, ir.IntegerAttr) and ir.IntegerAttr(attr).value == 1


def _within(bound: ir.Value, clamp: str, guard: _Guard) -> ir.Value:
    """The position load a bound is clamped by (``clamp``: ``maxui`` of a lower, ``minui``
    of an upper bound, as a sliced row's), else ``bound``: a loop from ``max(x,
    pos[i])`` to ``min(y, pos[i + 1])`` stays in row ``i``."""
    op = bound.owner
    if isinstance(op, ir.Block) or op.name != clamp:
        return bound
    for operand in op.operands:
        if _loaded_from(operand, guard.positions) is not None:
            return operand
    return bound


def _allocates(loop: ir.Operation) -> bool:
    """Whether ``loop`` holds a ``memref.alloca`` (see :func:`_row_loop`)."""
    return any(op.name == "memref.alloca" for op in preorder(loop))


def _tile(rows: ir.Operation, guards: list[_Guard], status: ir.Value) -> None:
    """Run ``rows`` (a parallel loop over rows) a tile of rows at a time (:func:`_tile_rows`);
    each tile first scans its rows' coordinates (``pos[t]`` to ``pos[t + tile]``) of
    each of ``guards``, and sets the status word if any is out of range, else runs
    its rows."""
    loc = rows.location
    index = ir.IndexType.get()
    lower, upper, _ = rows.operands
    with ir.InsertionPoint(rows), loc:
        size = _tile_rows(lower, upper, guards[0].positions)
        tiles = scf.ForOp(lower, upper, size)
    for name in rows.attributes:
        tiles.attributes[name] = rows.attributes[name]
    with ir.InsertionPoint(tiles.body), loc:
        start = tiles.induction_variable
        end = arith.MinUIOp(arith.AddIOp(start, size).result, upper).result
        bad: ir.Value | None = None
        for guard in guards:
            first = _position(guard.positions, start)
            last = _position(guard.positions, end)
            out = _scan_vectors(guard.coordinates, first, last, guard.limit)
            bad = out if bad is None else arith.OrIOp(bad, out).result
        assert bad is not None
        when = scf.IfOp(bad, has_else=True)
        with ir.InsertionPoint(when.then_block):
            _set_status(status)
            scf.YieldOp([])
        with ir.InsertionPoint(when.else_block):
            inner = scf.ForOp(start, end, arith.ConstantOp(index, 1).result)
            with ir.InsertionPoint(inner.body):
                end_of_row = scf.YieldOp([])
            scf.YieldOp([])
        scf.YieldOp([])
    body = rows.regions[0].blocks[0]
    body.arguments[0].replace_all_uses_with(inner.induction_variable)
    for op in list(body.operations)[:-1]:  # all but its yield
        op.move_before(end_of_row)
    rows.erase()


def _tile_rows(lower: ir.Value, upper: ir.Value, positions: ir.Value) -> ir.Value:
    """Rows per tile: ``TILE_ENTRIES`` coordinates' worth at the loop's mean row
    length, at most a ``MIN_TILES``-th of its rows, within 1..``MAX_TILE_ROWS``."""
    index = ir.IndexType.get()

    def const(value: int) -> ir.Value:
        return arith.ConstantOp(index, value).result

    rows = arith.SubIOp(upper, lower).result
    span = arith.SubIOp(_position(positions, upper), _position(positions, lower)).result
    per = arith.DivUIOp(
        arith.MulIOp(const(TILE_ENTRIES), rows).result, arith.MaxUIOp(span, const(1)).result
    ).result
    per = arith.MinUIOp(per, arith.DivUIOp(rows, const(MIN_TILES)).result).result
    return arith.MinUIOp(arith.MaxUIOp(per, const(1)).result, const(MAX_TILE_ROWS)).result


def _scan_vectors(buffer: ir.Value, lower: ir.Value, upper: ir.Value, limit: ir.Value) -> ir.Value:
    """Whether any of ``buffer[lower:upper]`` is at or above ``limit`` (unsigned):
    vectors of ``SCAN_LANES``, an unsigned max, the last one a masked load."""
    ty = ir.IntegerType(ir.MemRefType(buffer.type).element_type)
    vty = ir.VectorType.get([SCAN_LANES], ty)
    index = ir.IndexType.get()
    zeros = arith.ConstantOp(
        vty, ir.DenseElementsAttr.get_splat(vty, ir.IntegerAttr.get(ty, 0))
    ).result
    lanes = arith.ConstantOp(index, SCAN_LANES).result
    count = arith.SubIOp(upper, lower).result
    full = arith.SubIOp(count, arith.RemUIOp(count, lanes).result).result
    stop = arith.AddIOp(lower, full).result
    scan = scf.ForOp(lower, stop, lanes, [zeros])
    with ir.InsertionPoint(scan.body):
        value = vector.LoadOp(vty, buffer, [scan.induction_variable]).result
        scf.YieldOp([arith.MaxUIOp(scan.inner_iter_args[0], value).result])
    mask_t = ir.VectorType.get([SCAN_LANES], ir.IntegerType.get_signless(1))
    mask = vector.CreateMaskOp(mask_t, [arith.SubIOp(upper, stop).result]).result
    tail = vector.MaskedLoadOp(vty, buffer, [stop], mask, zeros).result
    most = arith.MaxUIOp(scan.results[0], tail).result
    top = vector.ReductionOp(ty, vector.CombiningKind.MAXUI, most).result
    return arith.CmpIOp(_UGE, top, limit).result


def _position(positions: ir.Value, at: ir.Value) -> ir.Value:
    value = memref.LoadOp(positions, [at]).result
    return arith.IndexCastUIOp(ir.IndexType.get(), value).result


def _scan(buffer: ir.Value, lower: ir.Value, upper: ir.Value, limit: ir.Value) -> ir.Value:
    """Whether any of ``buffer[lower:upper]`` is at or above ``limit`` (unsigned): a loop
    of loads and an unsigned max, which LLVM vectorizes. (Masked vector loads, written
    out here, ran 5-15% slower: what the loop vectorizer makes of this is better.)"""
    ty = ir.IntegerType(ir.MemRefType(buffer.type).element_type)
    zero = arith.ConstantOp(ty, ir.IntegerAttr.get(ty, 0)).result
    one = arith.ConstantOp(ir.IndexType.get(), 1).result
    scan = scf.ForOp(lower, upper, one, [zero])
    with ir.InsertionPoint(scan.body):
        value = memref.LoadOp(buffer, [scan.induction_variable]).result
        scf.YieldOp([arith.MaxUIOp(scan.inner_iter_args[0], value).result])
    return arith.CmpIOp(_UGE, scan.results[0], limit).result


def _set_status(status: ir.Value) -> None:
    i32 = ir.IntegerType.get_signless(32)
    one = arith.ConstantOp(i32, ir.IntegerAttr.get(i32, 1)).result
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    kind = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _ORI)
    memref.AtomicRMWOp(kind, one, status, [zero])


def _buffers(func: ir.Operation, args: list[dict], argument: int) -> tuple[int, int, int]:
    """The flat positions of ABI argument ``argument``'s positions and coordinates,
    and of the coordinates' level size."""
    if not 0 <= argument < len(args) or args[argument].get("kind") != "sparse":
        raise _Refused(func, f"'{GUARD}' names argument {argument}, which is not sparse")
    spec = args[argument]
    kind = compressed_kind(layout_from_attr(spec["layout"]))
    if kind is None or [b[0] for b in spec["buffers"]] != ["pos1", "crd1", "values"]:
        raise _Refused(func, f"'{GUARD}': argument {argument} is not in a csr or csc layout")
    base = sum(
        len(a["buffers"]) + len(a["shape"]) if a["kind"] == "sparse" else 1 for a in args[:argument]
    )
    return base, base + 1, base + 3 + (1 if kind == "csr" else 0)


def _limit(size: ir.Value, ty: ir.IntegerType) -> ir.Value:
    """``min(size, 2**(bits-1))`` as a ``ty``: seen unsigned, every coordinate in range
    is below it, and no negative one is."""
    index = ir.IndexType.get()
    top = 1 << (ty.width - 1)
    bits = top if top < 1 << 63 else top - (1 << 64)  # index attributes are signed 64-bit
    clamped = arith.MinUIOp(size, arith.ConstantOp(index, bits).result).result
    return arith.IndexCastUIOp(ty, clamped).result


def _reads(buffer: ir.Value) -> list[ir.Operation] | None:
    """The ops reading elements of ``buffer`` (through views); None where another op
    uses it (a copy, a call: its coordinates go where no check follows them)."""
    found, pending = [], [buffer]
    while pending:
        value = pending.pop()
        for use in value.uses:
            user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if user.name in _VIEWS and use.operand_number == 0:
                pending.append(user.results[0])
            elif user.name in _READS:
                found.append(user)
            elif user.name not in _METADATA:
                return None
    return found


def _next(op: ir.Operation) -> ir.Operation:
    ops = list(op.block.operations)
    return ops[ops.index(op) + 1].operation


def _clamp(read: ir.Operation, limit: ir.Value) -> ir.Value:
    """Replace ``read``'s value by itself where in range, else 0; returns "out of range"."""
    value = read.results[0]
    users = [u.owner for u in value.uses]
    ty = value.type
    if isinstance(ty, ir.VectorType):
        bound = vector.BroadcastOp(ty, limit).result
        zero = arith.ConstantOp(
            ty,
            ir.DenseElementsAttr.get_splat(
                ty, ir.IntegerAttr.get(ir.VectorType(ty).element_type, 0)
            ),
        ).result
    else:
        bound = limit
        zero = arith.ConstantOp(ty, ir.IntegerAttr.get(ty, 0)).result
    ok = arith.CmpIOp(_ULT, value, bound).result
    clamped = arith.SelectOp(ok, value, zero).result
    for user in users:
        user.operation.replace_uses_of_with(value, clamped)
    if isinstance(ty, ir.VectorType):
        ok = vector.ReductionOp(ir.IntegerType.get_signless(1), vector.CombiningKind.AND, ok).result
    return arith.XOrIOp(ok, boolean(True)).result


def _scannable(read: ir.Operation) -> bool:
    """Whether ``read`` is a load at the induction variable of the ``scf.for`` around it."""
    loop = read.parent
    return (
        read.name == "memref.load"
        and len(read.operands) == 2
        and loop.name == "scf.for"
        and read.operands[1] == loop.regions[0].blocks[0].arguments[0]
    )


def _prescan(read: ir.Operation, limit: ir.Value) -> tuple[ir.Value, ir.Block]:
    """Check the coordinates ``read``'s loop will load before it runs (a max over them,
    from memory the loop then reads from cache), and run the loop only if all are in
    range; returns "some are not" and its block. The loop itself stays as it was."""
    loop = read.parent.operation
    lower, upper, step = list(loop.operands)[:3]
    inits = list(loop.operands)[3:]
    del step  # the scan goes by vectors
    with ir.InsertionPoint(loop):
        bad = _scan(read.operands[0], lower, upper, limit)
        branch = scf.IfOp(bad, [r.type for r in loop.results], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp(inits)  # skipped: the call's results are dropped
    for old, new in zip(loop.results, branch.results, strict=True):
        old.replace_all_uses_with(new)
    loop.move_before(scf.YieldOp(list(loop.results), ip=ir.InsertionPoint(branch.else_block)))
    return bad, branch.operation.block


def _is_root(op: ir.Operation) -> bool:
    """Where "out of range" is reported: a function, or a parallel loop's body."""
    return op.name == "func.func" or (op.name == "scf.for" and _PARALLEL in op.attributes)


def _report(bad: ir.Value, block: ir.Block, status: ir.Value, loc: ir.Location) -> None:
    """Carry ``bad`` (defined in ``block``) out of the ops around it to the parallel
    loop's body (or the function's), and set the status word there when it is true."""
    try:
        bad, block = carry_out(bad, block, _is_root)
    except CarryError as err:
        raise _Refused(err.op, f"guarded coordinates are read inside '{err.op.name}'") from None
    terminator = list(block.operations)[-1].operation
    with ir.InsertionPoint(terminator), loc:
        when = scf.IfOp(bad)
        with ir.InsertionPoint(when.then_block):
            _set_status(status)
            scf.YieldOp([])
