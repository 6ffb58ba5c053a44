"""Each stored entry's dot product on a group of a warp's lanes (SDDMM's schedule).

Used by ``sparse-iter-gpu-map-loops``. A row loop whose body reads, then
loops over the row's entries, where each entry's body reads, sums over a
dense dimension into one f32 (``scf.for`` over ``k``, the dot product of two
dense rows) and then uses the sum (stores it), is mapped a warp per row:
32 lanes (``thread_x``) times 4 rows per block (``thread_y``). The warp
walks the row's entries :data:`ENTRIES` at a time (the step is uniform
across the warp; rows past the end iterate no entries): the lanes form
groups of :data:`GROUP`, group ``g`` takes entry ``p + g`` (a group past
the row's end recomputes entry ``p`` and stores nothing). In a group, lane
``l`` sums ``k = l, l + GROUP, ...`` (a group reads 32 contiguous bytes of
each dense row per step: whole sectors), a ``gpu.shuffle xor`` butterfly
inside the group gives its lanes the entry's sum, and the group's lane 0
runs what follows the sum (the store). Against a warp per entry (32 lanes
on one dot product, five shuffle rounds and one store per entry) this runs
four entries per pass with three rounds, as Sputnik's and dgSPARSE's SDDMM
give a short dot product a few lanes each.
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
from sparsecomp.transforms._vector_dot import vectorize

#: A warp per row: the entries loop must be uniform across the lanes of a shuffle.
LANES = 32
ROWS_PER_BLOCK = 4
#: Lanes per entry's dot product, and the entries a warp takes at once.
GROUP = 8
ENTRIES = LANES // GROUP


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
    """Replace ``parallel`` by blocks of 4 rows, a warp per row, groups of lanes over the
    row's entries and each group's lanes over ``loop``; returns the block loop."""
    outer, terminator, lane, inside = row_groups(parallel, LANES, ROWS_PER_BLOCK, build_parallel)
    for op in _ops(parallel.regions[0].blocks[0])[:-1]:  # all but scf.reduce
        op.move_before(terminator)
    lower, step = entries.operands[0], entries.operands[2]
    with ir.InsertionPoint(entries), parallel.location:
        stop = arith.select(inside, entries.operands[1], lower)
        entries.operands[1] = stop
        entries.operands[2] = arith.muli(step, _const(ENTRIES))
        group = arith.divui(lane, _const(GROUP))
        member = arith.remui(lane, _const(GROUP))
    body = entries.regions[0].blocks[0]
    first = body.arguments[0]
    with ir.InsertionPoint.at_block_begin(body), parallel.location:
        own = arith.addi(first, arith.muli(group, step))
        present = arith.cmpi(arith.CmpIPredicate.slt, own, stop)
        entry = arith.select(present, own, first)
    first.replace_all_uses_except(entry, [own.owner.operation, entry.owner.operation])
    _split(loop, member, present)
    parallel.erase()
    return outer


def _split(loop: ir.Operation, member: ir.Value, present: ir.Value) -> None:
    """A group's lanes take ``k = lo + l * step, ...`` from zero (or four at a time,
    :mod:`._vector_dot`); the butterfly in the group; its lane 0 runs the rest where its
    entry exists."""
    lower = loop.operands[0]
    with ir.InsertionPoint(loop), loop.location:
        start = arith.addi(lower, arith.muli(member, loop.operands[2]))
        stride = arith.muli(loop.operands[2], _const(GROUP))
        zero = arith.constant(ir.F32Type.get(), 0.0)
    init = loop.operands[3]
    loop.operands[0] = start
    loop.operands[2] = stride
    loop.operands[3] = zero
    block = loop.parent.regions[0].blocks[0]
    ops = _ops(block)
    after = ops[ops.index(loop) + 1 : -1]  # up to the entries loop's yield
    total, keep = vectorize(loop, lower, member, GROUP)
    with ir.InsertionPoint(ops[-1]), loop.location:
        partial, readers = butterfly(total, GROUP)
        leader = arith.cmpi(arith.CmpIPredicate.eq, member, _const(0))
        guard = scf.IfOp(arith.andi(leader, present))
        with ir.InsertionPoint(guard.then_block):
            done = scf.YieldOp([])
    with ir.InsertionPoint(done), loop.location:
        result = arith.addf(init, partial)
    loop.results[0].replace_all_uses_except(result, readers + keep)
    for op in after:
        op.move_before(done)
