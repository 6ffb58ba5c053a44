"""Rows whose body is a sum over the row's entries, on a group of lanes (SpMV's schedule).

Used by ``sparse-iter-gpu-map-loops``. A row loop whose body computes
bounds, then one ``scf.for`` that sums (``arith.addf``) into one f32 value,
then uses the sum, is mapped ``lanes`` threads per row (``thread_x``) times
``128 / lanes`` rows per block (``thread_y``): lane ``l`` of a row sums the
entries ``lo + l, lo + l + lanes, ...`` (consecutive lanes read consecutive
entries: coalesced), a butterfly of ``gpu.shuffle xor`` (offsets ``lanes /
2 .. 1``, inside each group of lanes) gives every lane the row's sum, and
lane 0 runs what follows the loop. Rows past the end run an empty loop
(their bounds are read from row 0) so that every lane reaches the
shuffles, which need the whole warp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.dialects import arith, gpu, scf

_XOR = "xor"
#: Ops the part of the row body before the sum may hold (no writes).
_PURE_PREFIXES = ("arith.", "math.", "index.")
_READS = ("memref.load", "memref.dim")


def _ops(block: ir.Block) -> list[ir.Operation]:
    return [o.operation for o in block.operations]


def _const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _reads_only(ops: list[ir.Operation]) -> bool:
    """Loads and pure arithmetic only, also inside ``scf.if`` (lanes may only read: a store
    would be repeated or raced)."""
    for op in ops:
        if op.name == "scf.if":
            blocks = [b for region in op.regions for b in region.blocks]
            if not all(_reads_only(_ops(b)[:-1]) for b in blocks):
                return False
        elif op.name not in _READS and not op.name.startswith(_PURE_PREFIXES):
            return False
    return True


def _adds_to(value: ir.Value, carried: ir.Value, users: list[ir.Operation]) -> bool:
    """``value`` is ``carried + x``, or an ``scf.if`` yielding ``carried + x`` or ``carried``
    (ELL padding: slots whose coordinate is -1 add nothing). ``users`` collects the ops
    that may use ``carried``."""
    op = getattr(value.owner, "operation", value.owner)
    if not isinstance(op, ir.Operation):
        return False
    if op.name == "arith.addf":
        users.append(op)
        return carried in list(op.operands)
    if op.name != "scf.if" or len(op.results) != 1 or len(op.regions[1].blocks) != 1:
        return False
    ends = [_ops(region.blocks[0])[-1] for region in op.regions]
    yields = [end.operands[0] for end in ends]
    users += [end for end, v in zip(ends, yields, strict=True) if v == carried]
    grows = [v for v in yields if v != carried]
    return bool(grows) and all(_adds_to(v, carried, users) for v in grows)


def sum_loop(parallel: ir.Operation) -> ir.Operation | None:
    """The ``scf.for`` of ``parallel``'s body that sums over the row, if the body has that form."""
    body = _ops(parallel.regions[0].blocks[0])
    loops = [op for op in body if op.name == "scf.for"]
    if len(loops) != 1:
        return None
    loop = loops[0]
    if not _reads_only(body[: body.index(loop)]) or not sums(loop):
        return None
    return loop


def sums(loop: ir.Operation) -> bool:
    """``loop`` (an ``scf.for``) only reads and adds into its one f32 result."""
    if loop.name != "scf.for" or len(loop.results) != 1 or str(loop.results[0].type) != "f32":
        return False
    inner = _ops(loop.regions[0].blocks[0])
    if not _reads_only(inner[:-1]):
        return False
    carried = loop.regions[0].blocks[0].arguments[1]
    users: list[ir.Operation] = []
    if not _adds_to(inner[-1].operands[0], carried, users):
        return False
    # a lane's partial sum must feed nothing but the sum itself
    return all(use.owner.operation in users for use in carried.uses)


def static_lanes(loop: ir.Operation, default: int) -> int:
    """Lanes for a row's sum: its trip count rounded up to a power of 2 (at most 32) when
    constant (an ELL bucket of width ``w``: ``w`` lanes, one slot each), else ``default``."""
    trips = [_constant(v) for v in loop.operands[:3]]
    if any(t is None for t in trips) or trips[2] <= 0:  # type: ignore[operator]
        return default
    lo, hi, step = trips
    count = max(0, -(-(hi - lo) // step))  # type: ignore[operator]
    lanes = 1
    while lanes < min(count, 32):
        lanes *= 2
    return lanes


def _constant(value: ir.Value) -> int | None:
    op = getattr(value.owner, "operation", value.owner)
    if isinstance(op, ir.Operation) and op.name == "arith.constant":
        attr = op.attributes["value"]
        if isinstance(attr, ir.IntegerAttr):
            return int(attr.value)
        try:
            return int(ir.IntegerAttr(attr).value)
        except ValueError:
            return None
    return None


def row_groups(
    parallel: ir.Operation,
    lanes: int,
    rows_per_block: int,
    build_parallel: Callable[[list[ir.Value], tuple[str, ...]], tuple[ir.Operation, list[Any]]],
) -> tuple[ir.Operation, ir.Operation, ir.Value, ir.Value]:
    """Blocks of ``rows_per_block`` rows, ``lanes`` lanes (``thread_x``) per row
    (``thread_y``), built before the row loop ``parallel``; its row variable becomes the
    thread's row (row 0 for rows past the end). Returns the block loop, the terminator of
    the thread loop (where the row's body goes), the lane and whether the row exists."""
    lower, upper, step = parallel.operands[0], parallel.operands[1], parallel.operands[2]
    with ir.InsertionPoint(parallel), parallel.location:
        rows = arith.ceildivsi(arith.subi(upper, lower), step)
        blocks = arith.ceildivsi(rows, _const(rows_per_block))
        outer, (block_id,) = build_parallel([blocks], ("block_x",))
    with ir.InsertionPoint.at_block_terminator(outer.regions[0].blocks[0]), parallel.location:
        threads = [_const(lanes), _const(rows_per_block)]
        inner, (lane, slot) = build_parallel(threads, ("thread_x", "thread_y"))
    terminator = _ops(inner.regions[0].blocks[0])[-1]
    with ir.InsertionPoint(terminator), parallel.location:
        index = arith.addi(arith.muli(block_id, _const(rows_per_block)), slot)
        inside = arith.cmpi(arith.CmpIPredicate.slt, index, rows)
        clamped = arith.select(inside, index, _const(0))
        row = arith.addi(lower, arith.muli(clamped, step))
    parallel.regions[0].blocks[0].arguments[0].replace_all_uses_with(row)
    return outer, terminator, lane, inside


def map_sum_rows(
    parallel: ir.Operation,
    loop: ir.Operation,
    lanes: int,
    build_parallel: Callable[[list[ir.Value], tuple[str, ...]], tuple[ir.Operation, list[Any]]],
) -> ir.Operation:
    """Replace ``parallel`` by blocks of ``128 / lanes`` rows, ``lanes`` lanes per row; returns
    the block loop.

    ``build_parallel(bounds, processors)`` makes a mapped ``scf.parallel``.
    """
    outer, terminator, lane, inside = row_groups(parallel, lanes, 128 // lanes, build_parallel)
    body = parallel.regions[0].blocks[0]
    ops = _ops(body)
    at = ops.index(loop)
    for op in ops[: at + 1]:
        op.move_before(terminator)
    init = loop.operands[3]
    _spread(loop, lane, lanes, inside)
    total = loop.results[0]
    with ir.InsertionPoint(terminator), parallel.location:
        partial, readers = butterfly(total, lanes)
        first = arith.cmpi(arith.CmpIPredicate.eq, lane, _const(0))
        guard = scf.IfOp(arith.andi(inside, first))
        with ir.InsertionPoint(guard.then_block):
            done = scf.YieldOp([])
    with ir.InsertionPoint(done), parallel.location:
        result = arith.addf(init, partial)
    if partial == total:  # one lane per row: no butterfly
        readers.append(result.owner.operation)
    total.replace_all_uses_except(result, readers)
    for op in ops[at + 1 :]:
        if op.name != "scf.reduce":
            op.move_before(done)
    parallel.erase()
    return outer


def butterfly(total: ir.Value, lanes: int) -> tuple[ir.Value, list[ir.Operation]]:
    """Every lane of a group of ``lanes`` gets the group's sum of ``total`` (``gpu.shuffle
    xor`` by ``lanes / 2 .. 1``); also the ops that read ``total`` itself."""
    readers: list[ir.Operation] = []
    partial = total
    offset = lanes // 2
    width = arith.constant(ir.IntegerType.get_signless(32), 32)
    while offset:
        mask = arith.constant(ir.IntegerType.get_signless(32), offset)
        shuffle = gpu.ShuffleOp(partial, mask, width, _XOR)
        added = arith.addf(partial, shuffle.results[0])
        if partial == total:
            readers += [shuffle.operation, added.owner.operation]
        partial = added
        offset //= 2
    return partial, readers


def _spread(loop: ir.Operation, lane: ir.Value, lanes: int, inside: ir.Value) -> None:
    """Lane ``l`` of the row takes the entries ``lo + l`` step ``lanes``; zero init;
    rows past the end iterate nothing."""
    with ir.InsertionPoint(loop), loop.location:
        lower, upper = loop.operands[0], loop.operands[1]
        start = arith.addi(lower, arith.muli(lane, loop.operands[2]))
        stop = arith.select(inside, upper, lower)
        zero = arith.constant(ir.F32Type.get(), 0.0)
        stride = arith.muli(loop.operands[2], _const(lanes))
    loop.operands[0] = start
    loop.operands[1] = stop
    loop.operands[2] = stride
    loop.operands[3] = zero
