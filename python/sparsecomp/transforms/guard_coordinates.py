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
_ULT, _UGT, _UGE = 6, 8, 9  # arith::CmpIPredicate
#: Rows a parallel loop's tile scans the coordinates of at once.
TILE_ROWS = 64
_ORI = 14  # arith::AtomicRMWKind::ori


class _Refused(Exception):
    def __init__(self, op: ir.Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


@dataclasses.dataclass(frozen=True)
class GuardCoordinatesPass(SparsecompPass):
    """Check every coordinate a kernel reads from a caller's buffer before it is used,
    and report any out of range through a status word, so that the runtime need not.

    A scipy CSR (CSC) matrix reaches a kernel with its own arrays, which the
    caller may change between calls: the runtime checked every index against
    the column (row) count on every call, one more pass over memory than the
    kernel's (a third of SpMV's traffic). A function whose attribute
    ``sparse_iter.guard`` names sparse arguments (ABI positions; a ``csr`` or
    ``csc`` layout each) checks them itself, each read in the cheapest way
    that covers it:

    1. **Rows, a tile at a time.** A read at the induction variable of a loop
       from ``pos[i]`` to ``pos[i + 1]`` (or within them: from
       ``max(x, pos[i])`` to ``min(y, pos[i + 1])``, a row of a sliced nest,
       ``lowering/slices.py``; each slice's parallel loop scans its tiles),
       ``i`` that of the ``sparse_iter.parallel`` loop (step 1, no ``memref.alloca`` inside,
       whose stack an iteration releases): the parallel loop goes by tiles
       of ``TILE_ROWS`` rows; each tile first takes the unsigned max of its
       rows' coordinates (``pos[t]`` to ``pos[t + 64]``, a loop LLVM
       vectorizes, over memory the rows then read from cache) and runs its
       rows, unchanged, only if it is below the level size. SpMV, SpMM and
       SDDMM over CSR read this way. Where these loads (``pos[i]``,
       ``pos[i + 1]``) are the only reads of the positions, each tile first
       checks that its positions do not decrease and end within the
       coordinates (ABI ``"guarded_positions": true``): the runtime then
       checks only the first and last position, O(1).
    2. **A loop's segment.** Any other read at the induction variable of its
       loop: the same scan of the loop's range, before the loop, which runs
       only if the scan passed (its results are then the loop's inits).
    3. **One read.** Anything else (vector reads, reads through views, at
       other indices): the value read is replaced by 0 where out of range,
       and "out of range" is or-ed through the enclosing ``scf.for``
       (``iter_args``), ``scf.if`` and ``scf.while`` ops up to the parallel
       loop's body (else the function's).

    Where a check fails, ``memref.atomic_rmw ori`` sets the status word: one
    conditional atomic per tile, loop or row, none in inner loops. The level
    size is clamped to the coordinate type's largest value + 1, so that a
    negative coordinate (unsigned: above it) fails too. The function takes
    the status word as a new last argument, ``memref<1xi32>``, and its ABI
    says ``"status": true`` and ``"guarded": true`` on each such argument: the
    runtime passes a zeroed word and, where it comes back set, checks the
    arguments itself and raises the error it finds; the results are dropped.

    Otherwise positions are checked by the runtime (O(rows), not
    O(entries)): the scans' ranges come from them. Runs on bufferized functions, before
    ``sparse-iter-parallelize``. An argument whose coordinates go anywhere
    else (a copy into a result, as SDDMM's, a call) is left as it is, with
    ``"guarded": false`` in the ABI: the runtime keeps checking it. Reads
    inside other region ops than those above are an error.

    Before:

    ```mlir
    func.func @spmv(%pos: memref<?xi32>, %crd: memref<?xi32>, ..., %cols: index, ...)
        attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "..."} {
      scf.for %i = %c0 to %rows step %c1 {
        %lo = memref.load %pos[%i] ...
        %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
          %j = memref.load %crd[%p] : memref<?xi32>
          ...
      } {sparse_iter.parallel}
    ```

    After:

    ```mlir
    func.func @spmv(..., %status: memref<1xi32>) attributes {sparse_iter.abi = "..."} {
      scf.for %t = %c0 to %rows step %c64 {
        %end = arith.minui %t_64, %rows : index
        %max = scf.for %p = %first to %last step %c1 iter_args(%m = %c0_i32) -> (i32) {
          %j = memref.load %crd[%p] : memref<?xi32>
          %m2 = arith.maxui %m, %j : i32
          scf.yield %m2 : i32
        }
        %bad = arith.cmpi uge, %max, %limit : i32
        scf.if %bad {
          %old = memref.atomic_rmw ori %c1_i32, %status[%c0] : (i32, memref<1xi32>) -> i32
        } else {
          scf.for %i = %t to %end step %c1 {
            ... the rows, as they were
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
        status = _add_status(func)
        abi[STATUS] = True
        tiles = _tiles(guards)
        for guard in guards:
            abi["args"][guard.argument]["guarded_positions"] = guard.positions_too
    func.attributes[_ABI] = ir.StringAttr.get(json.dumps(abi, separators=(",", ":")))
    if not guards:
        return
    for loop, tiled in tiles.items():
        _tile(loop, tiled, status)
    for guard in guards:
        for read in guard.reads:
            _guard_read(read, guard, status)


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
        guards.append(_Guard(argument, entry.arguments[pos], buffer, limit, reads))
    return guards


def _tiles(guards: list[_Guard]) -> dict[ir.Operation, list[_Guard]]:
    """Parallel loops over rows -> the guards whose rows they read (those reads leave
    ``reads``); a guard all of whose reads and position loads are such rows' has
    ``positions_too``."""
    tiles: dict[ir.Operation, list[_Guard]] = {}
    for guard in guards:
        for read in list(guard.reads):
            if (loop := _row_loop(read, guard)) is not None:
                tiled = tiles.setdefault(loop, [])
                if guard not in tiled:
                    tiled.append(guard)
                guard.reads.remove(read)
    for guard in guards:
        loops = {loop for loop, tiled in tiles.items() if guard in tiled}
        guard.positions_too = not guard.reads and _read_only_by_rows(guard.positions, loops)
    return tiles


def _guard_read(read: ir.Operation, guard: _Guard, status: ir.Value) -> None:
    """Guard one read that no tile covers: its loop's range scanned, else itself."""
    loc = read.location
    with loc:
        if _scannable(read, guard.coordinates):
            bad, block = _prescan(read, guard.limit)
        else:
            with ir.InsertionPoint(_next(read)):
                bad = _clamp(read, guard.limit)
            block = read.block
        _report(bad, block, status, loc)


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
    """One guarded argument: its ABI position, positions and coordinates, the
    coordinates' limit, the reads of them not handled yet, and whether the tiles
    check its positions too."""

    argument: int
    positions: ir.Value
    coordinates: ir.Value
    limit: ir.Value
    reads: list[ir.Operation]
    positions_too: bool = False


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


def _row_loop(read: ir.Operation, guard: _Guard) -> ir.Operation | None:
    """The parallel loop whose row ``read`` reads a coordinate of: ``read`` loads at the
    induction variable of a loop from ``pos[i]`` to ``pos[i + 1]``, ``i`` the parallel
    loop's (step 1) induction variable. None for other reads."""
    if not _scannable(read, guard.coordinates):
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


def _within(bound: ir.Value, clamp: str, guard: _Guard) -> ir.Value:
    """The position load a bound is clamped by (``clamp``: ``maxui`` of a lower, ``minui``
    of an upper bound, as a sliced row's, ``lowering/slices.py``), else ``bound``: a loop
    from ``max(x, pos[i])`` to ``min(y, pos[i + 1])`` stays in row ``i``."""
    op = bound.owner
    if isinstance(op, ir.Block) or op.name != clamp:
        return bound
    for operand in op.operands:
        if _loaded_from(operand, guard.positions) is not None:
            return operand
    return bound


def _allocates(loop: ir.Operation) -> bool:
    """Whether ``loop`` holds a ``memref.alloca``: an iteration's stack is released as
    it ends (``convert-scf-to-openmp``), so a tile of rows would hold 64 rows' worth."""
    return any(op.name == "memref.alloca" for op in preorder(loop))


def _tile(rows: ir.Operation, guards: list[_Guard], status: ir.Value) -> None:
    """Run ``rows`` (a parallel loop over rows) a tile of rows at a time: each tile first
    scans its rows' coordinates (``pos[t]`` to ``pos[t + tile]``) of each of ``guards``,
    and runs its rows only where all are in range, else sets the status word."""
    loc = rows.location
    index = ir.IndexType.get()
    lower, upper, _ = rows.operands
    with ir.InsertionPoint(rows), loc:
        size = arith.ConstantOp(index, TILE_ROWS).result
        tiles = scf.ForOp(lower, upper, size)
    for name in rows.attributes:
        tiles.attributes[name] = rows.attributes[name]
    with ir.InsertionPoint(tiles.body), loc:
        start = tiles.induction_variable
        end = arith.MinUIOp(arith.AddIOp(start, size).result, upper).result
        run_rows = ir.InsertionPoint.current
        for guard in guards:
            with run_rows:
                first = _position(guard.positions, start)
                last = _position(guard.positions, end)
                if guard.positions_too:  # in order and within the coordinates, first
                    bad = _positions_bad(guard.positions, start, end, last, guard.coordinates)
                    run_rows = _unless(bad, status)
            with run_rows:
                run_rows = _unless(_scan(guard.coordinates, first, last, guard.limit), status)
        with run_rows:
            inner = scf.ForOp(start, end, arith.ConstantOp(index, 1).result)
            with ir.InsertionPoint(inner.body):
                end_of_row = scf.YieldOp([])
        scf.YieldOp([])
    body = rows.regions[0].blocks[0]
    body.arguments[0].replace_all_uses_with(inner.induction_variable)
    for op in list(body.operations)[:-1]:  # all but its yield
        op.move_before(end_of_row)
    rows.erase()


def _unless(bad: ir.Value, status: ir.Value) -> ir.InsertionPoint:
    """``scf.if bad { set the status word } else { }``; returns the else block's start."""
    branch = scf.IfOp(bad, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        _set_status(status)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        end = scf.YieldOp([])
    return ir.InsertionPoint(end)


def _read_only_by_rows(positions: ir.Value, loops: set[ir.Operation]) -> bool:
    """Whether every use of ``positions`` is a load at ``i`` or ``i + 1``, ``i`` the
    induction variable of one of ``loops`` (parallel loops over rows to be tiled)."""
    rows = [loop.regions[0].blocks[0].arguments[0] for loop in loops]
    for use in positions.uses:
        load = use.owner
        if load.name != "memref.load" or len(load.operands) != 2:
            return False
        at = load.operands[1]
        if not any(at == row or _is_next(at, row) for row in rows):
            return False
    return bool(rows)


def _positions_bad(
    positions: ir.Value, start: ir.Value, end: ir.Value, last: ir.Value, crd: ir.Value
) -> ir.Value:
    """Whether ``positions[start:end + 1]`` decrease anywhere (unsigned) or end beyond
    the coordinates: then some row's range leaves them."""
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    one = arith.ConstantOp(index, 1).result
    false = arith.ConstantOp(i1, ir.IntegerAttr.get(i1, 0)).result
    scan = scf.ForOp(start, end, one, [false])
    with ir.InsertionPoint(scan.body):
        at = scan.induction_variable
        here = memref.LoadOp(positions, [at]).result
        after = memref.LoadOp(positions, [arith.AddIOp(at, one).result]).result
        down = arith.CmpIOp(_ULT, after, here).result
        scf.YieldOp([arith.OrIOp(scan.inner_iter_args[0], down).result])
    size = memref.DimOp(crd, arith.ConstantOp(index, 0).result).result
    beyond = arith.CmpIOp(_UGT, last, size).result
    return arith.OrIOp(scan.results[0], beyond).result


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
    """The flat positions of ABI argument ``argument``'s positions and coordinates, and
    of its coordinates' level size."""
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


def _scannable(read: ir.Operation, buffer: ir.Value) -> bool:
    """Whether ``read`` loads ``buffer`` at the induction variable of the loop around it."""
    loop = read.parent
    return (
        read.name == "memref.load"
        and len(read.operands) == 2
        and read.operands[0] == buffer
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
