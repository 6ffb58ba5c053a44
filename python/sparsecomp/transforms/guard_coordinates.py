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
_ORI = 14  # arith::AtomicRMWKind::ori


class _Refused(Exception):
    def __init__(self, op: ir.Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


@dataclasses.dataclass(frozen=True)
class GuardCoordinatesPass(SparsecompPass):
    """Check every coordinate a kernel reads from a caller's buffer as it is read,
    and report any out of range through a status word, so that the runtime need not.

    A scipy CSR (CSC) matrix reaches a kernel with its own arrays, which the
    caller may change between calls: the runtime checked every index against
    the column (row) count on every call, one more pass over memory than the
    kernel's (a third of SpMV's traffic). A function whose attribute
    ``sparse_iter.guard`` names sparse arguments (ABI positions; a ``csr`` or
    ``csc`` layout each) checks them itself, each read (``memref.load``,
    vector reads, reads through views) in one of two ways:

    1. **Clamped.** The read is followed by a compare with the level size,
       and its value is replaced by 0 where out of range (so that no read it
       indexes leaves its buffer). In SpMV's row loop that is an unsigned
       compare and an ``or`` per coordinate, which LLVM vectorizes with the
       loop (a mask register carried along).
    2. **Scanned first.** A load at the induction variable of an ``scf.for``
       whose body writes memory or holds region ops (SpGEMM's scatter into a
       row workspace: a loop LLVM does not vectorize, where a check per read
       lengthens every iteration): before the loop, an unsigned max over the
       coordinates it will read (a loop LLVM vectorizes, over memory the loop
       then reads from cache), and the loop runs only if that is in range.

    Either way "out of range" is or-ed through the enclosing ``scf.for``
    (``iter_args``), ``scf.if`` and ``scf.while`` ops up to the
    ``sparse_iter.parallel`` loop's body (else the function's), where
    ``memref.atomic_rmw ori`` sets the status word when it is true: one
    conditional atomic per row of the parallel loop, none in inner loops.

    Measured on a 2-core Xeon, guarded over unguarded kernel: SpMV 1.0-1.05x
    (R-MAT, uniform, ca-HepPh) to 1.2-1.25x (FEM, the band: short rows, where
    the core's instruction throughput bounds SpMV); SpGEMM 1.1-1.25x with its
    scatter loops scanned first, 1.3-1.5x with them clamped. (An earlier form
    scanned a tile of 64 rows' coordinates before the rows, SpMV's included:
    SpMV 1.2-1.4x, the scan's loads taking the memory stalls that the rows'
    loads had hidden.)

    The level size is clamped to the coordinate type's largest value + 1, so
    that a negative coordinate (unsigned: above it) fails too. The function
    takes the status word as a new last argument, ``memref<1xi32>``, and its
    ABI says ``"status": true`` and ``"guarded": true`` on each such argument:
    the runtime passes a zeroed word and, where it comes back set, checks the
    arguments itself and raises the error it finds; the results are dropped.
    Positions are checked by the runtime (O(rows), not O(entries)): the reads'
    ranges come from them, and a level size of 0 with entries is refused
    there (the clamped reads would read element 0).

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

    After (clamped):

    ```mlir
    func.func @spmv(..., %status: memref<1xi32>) attributes {sparse_iter.abi = "..."} {
      scf.for %i = %c0 to %rows step %c1 {
        ...
        %s:2 = scf.for %p = %lo to %hi step %c1
            iter_args(%acc = %zero, %seen = %false) -> (f32, i1) {
          %j = memref.load %crd[%p] : memref<?xi32>
          %ok = arith.cmpi ult, %j, %limit : i32
          %safe = arith.select %ok, %j, %c0_i32 : i32
          %out = arith.xori %ok, %true : i1
          ... (%safe where %j was)
          %any = arith.ori %seen, %out : i1
          scf.yield %a, %any : f32, i1
        }
        ...
        scf.if %s#1 {
          %old = memref.atomic_rmw ori %c1_i32, %status[%c0] : (i32, memref<1xi32>) -> i32
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
        crd, bound = _buffers(func, abi["args"], argument)
        buffer = entry.arguments[crd]
        reads = _reads(buffer)
        abi["args"][argument]["guarded"] = reads is not None
        if reads is None:
            continue  # the runtime keeps checking this argument
        ty = ir.IntegerType(ir.MemRefType(buffer.type).element_type)
        with ir.InsertionPoint.at_block_begin(entry), func.location:
            limit = _limit(entry.arguments[bound], ty)
        guards.append(_Guard(limit, reads))
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
    """One guarded argument: its coordinates' limit and the reads of them."""

    limit: ir.Value
    reads: list[ir.Operation]


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


def _buffers(func: ir.Operation, args: list[dict], argument: int) -> tuple[int, int]:
    """The flat positions of ABI argument ``argument``'s coordinates and of their
    level size."""
    if not 0 <= argument < len(args) or args[argument].get("kind") != "sparse":
        raise _Refused(func, f"'{GUARD}' names argument {argument}, which is not sparse")
    spec = args[argument]
    kind = compressed_kind(layout_from_attr(spec["layout"]))
    if kind is None or [b[0] for b in spec["buffers"]] != ["pos1", "crd1", "values"]:
        raise _Refused(func, f"'{GUARD}': argument {argument} is not in a csr or csc layout")
    base = sum(
        len(a["buffers"]) + len(a["shape"]) if a["kind"] == "sparse" else 1 for a in args[:argument]
    )
    return base + 1, base + 3 + (1 if kind == "csr" else 0)


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
