"""Each stored entry's dot product on a warp's lanes (SDDMM's schedule).

Used by ``sparse-iter-gpu-map-loops``. A row loop whose body reads, then
loops over the row's entries, where each entry's body reads, sums over a
dense dimension into one f32 (``scf.for`` over ``k``, the dot product of two
dense rows) and then uses the sum (stores it), is mapped a warp per row:
32 lanes (``thread_x``) times 4 rows per block (``thread_y``). Every lane of
the warp walks the row's entries together (the warp is one row, so the loop
is uniform); per entry, lane ``l`` sums ``k = l, l + 32, ...`` (consecutive
lanes read consecutive elements of both dense rows: coalesced), a ``gpu.shuffle
xor`` butterfly gives every lane the entry's sum, and lane 0 runs what follows
the sum (the store). Rows past the end iterate no entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.dialects import arith, scf

from sparsecomp.transforms._lane_reduction import (
    _const,
    _ops,
    _reads_only,
    butterfly,
    row_groups,
    sums,
)

#: A warp per row: the entries loop must be uniform across the lanes of a shuffle.
LANES = 32
ROWS_PER_BLOCK = 4


def entry_sum(parallel: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """``(entries loop, sum loop)`` when ``parallel``'s body has the SDDMM form, else None."""
    body = _ops(parallel.regions[0].blocks[0])
    loops = [op for op in body if op.name == "scf.for"]
    if len(loops) != 1 or body[-1].name != "scf.reduce":
        return None
    entries = loops[0]
    at = body.index(entries)
    if len(entries.results) or not _reads_only(body[:at]) or at != len(body) - 2:
        return None
    inner = _ops(entries.regions[0].blocks[0])
    summed = [op for op in inner if op.name == "scf.for"]
    if len(summed) != 1 or not sums(summed[0]):
        return None
    if not _reads_only(inner[: inner.index(summed[0])]):
        return None
    return entries, summed[0]


def map_sum_entries(
    parallel: ir.Operation,
    entries: ir.Operation,
    loop: ir.Operation,
    build_parallel: Callable[[list[ir.Value], tuple[str, ...]], tuple[ir.Operation, list[Any]]],
) -> ir.Operation:
    """Replace ``parallel`` by blocks of 4 rows, a warp per row, lanes over ``loop``; returns
    the block loop."""
    outer, terminator, lane, inside = row_groups(parallel, LANES, ROWS_PER_BLOCK, build_parallel)
    for op in _ops(parallel.regions[0].blocks[0])[:-1]:  # all but scf.reduce
        op.move_before(terminator)
    with ir.InsertionPoint(entries), parallel.location:
        entries.operands[1] = arith.select(inside, entries.operands[1], entries.operands[0])
    _split(loop, lane)
    parallel.erase()
    return outer


def _split(loop: ir.Operation, lane: ir.Value) -> None:
    """Lanes take ``k = lo + l * step, ...`` from zero; the butterfly; lane 0 runs the rest."""
    with ir.InsertionPoint(loop), loop.location:
        start = arith.addi(loop.operands[0], arith.muli(lane, loop.operands[2]))
        stride = arith.muli(loop.operands[2], _const(LANES))
        zero = arith.constant(ir.F32Type.get(), 0.0)
    init = loop.operands[3]
    loop.operands[0] = start
    loop.operands[2] = stride
    loop.operands[3] = zero
    block = loop.parent.regions[0].blocks[0]
    ops = _ops(block)
    after = ops[ops.index(loop) + 1 : -1]  # up to the entries loop's yield
    total = loop.results[0]
    with ir.InsertionPoint(ops[-1]), loop.location:
        partial, readers = butterfly(total, LANES)
        guard = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, lane, _const(0)))
        with ir.InsertionPoint(guard.then_block):
            done = scf.YieldOp([])
    with ir.InsertionPoint(done), loop.location:
        result = arith.addf(init, partial)
    total.replace_all_uses_except(result, readers)
    for op in after:
        op.move_before(done)
