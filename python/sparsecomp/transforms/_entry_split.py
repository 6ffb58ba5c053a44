"""SDDMM's entries shared out evenly between warps, not a warp per row.

Used by ``sparse-iter-gpu-map-loops`` with ``balance=nonzeros``, on the form
:func:`._lane_dot.entry_sum` takes (a row loop whose body loads the row's
bounds ``pos[i]``, ``pos[i + 1]`` and loops over its entries, each a dot
product stored at the entry). By rows, a warp walks a whole row, and on a
power-law matrix the warp of the longest row finishes long after the rest.
Here warp ``w`` of ``W`` (as many as rows, 4 a block) takes entries ``[w E,
w E + E)``, ``E = ceil(nnz / W)``, ``nnz = pos[m]`` read on the device (the
grid stays sized by rows: the host reads no positions). It finds the rows of
its first and last entries by binary searches of the positions; then, as by
rows, it walks its entries 4 at a time, a group of 8 lanes per entry
(:mod:`._lane_dot`), each group finding its entry's row by a binary search
between those two (mostly one row, or a few). Each entry is written once,
by its group's lane 0: no atomics and no fill, as the output holds one value
per entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.dialects import arith, memref

from sparsecomp.transforms._lane_dot import ENTRIES, GROUP, LANES, ROWS_PER_BLOCK, _split
from sparsecomp.transforms._lane_reduction import _const, _ops
from sparsecomp.transforms._nonzero_split import _constant, _search, reads_only, row_bounds

Parallel = Callable[[list[ir.Value], tuple[str, ...]], tuple[ir.Operation, list[Any]]]


def balanced_form(
    parallel: ir.Operation, entries: ir.Operation
) -> tuple[ir.Value, str | None] | None:
    """``(positions, cast)`` where the entries loop of ``parallel`` (a row loop from 0 step
    1) runs from ``pos[i]`` to ``pos[i + 1]`` step 1 and its body reads nothing of the
    row's body but ``i``; else None."""
    if len(parallel.regions[0].blocks[0].arguments) != 1:
        return None
    if _constant(parallel.operands[0]) != 0 or _constant(parallel.operands[2]) != 1:
        return None
    row = parallel.regions[0].blocks[0].arguments[0]
    bounds = row_bounds(entries, row)
    if bounds is None or not reads_only(entries, [row], parallel):
        return None
    return bounds


def map_entries_balanced(
    parallel: ir.Operation,
    entries: ir.Operation,
    loop: ir.Operation,
    positions: ir.Value,
    cast: str | None,
    build_parallel: Parallel,
) -> ir.Operation:
    """Replace ``parallel`` by warps over equal shares of the entries (see the module);
    returns the block loop."""
    index = ir.IndexType.get()
    rows = parallel.operands[1]

    def position(k: ir.Value) -> ir.Value:
        value = memref.load(positions, [k])
        if cast is not None:
            value = ir.Operation.create(cast, results=[index], operands=[value]).result
        return value

    with ir.InsertionPoint(parallel), parallel.location:
        blocks = arith.ceildivsi(rows, _const(ROWS_PER_BLOCK))
        warps = arith.muli(blocks, _const(ROWS_PER_BLOCK))
        outer, (block,) = build_parallel([blocks], ("block_x",))
    with ir.InsertionPoint.at_block_terminator(outer.regions[0].blocks[0]), parallel.location:
        inner, (lane, slot) = build_parallel(
            [_const(LANES), _const(ROWS_PER_BLOCK)], ("thread_x", "thread_y")
        )
    terminator = _ops(inner.regions[0].blocks[0])[-1]
    with ir.InsertionPoint(terminator), parallel.location:
        me = arith.addi(arith.muli(block, _const(ROWS_PER_BLOCK)), slot)
        total = position(rows)
        share = arith.ceildivui(total, warps)
        begin = arith.minui(arith.muli(me, share), total)
        end = arith.minui(arith.addi(begin, share), total)
        works = arith.cmpi(arith.CmpIPredicate.ult, begin, end)
        last = arith.select(works, arith.subi(end, _const(1)), begin)
        low = _search(position, begin, rows)
        high = arith.addi(_search(position, last, rows, start=low), _const(1))
        group = arith.divui(lane, _const(GROUP))
        member = arith.remui(lane, _const(GROUP))
    entries.move_before(terminator)
    with ir.InsertionPoint(entries), parallel.location:
        entries.operands[0] = begin
        entries.operands[1] = end
        entries.operands[2] = _const(ENTRIES)
    body = entries.regions[0].blocks[0]
    first = body.arguments[0]
    with ir.InsertionPoint.at_block_begin(body), parallel.location:
        own = arith.addi(first, group)
        present = arith.cmpi(arith.CmpIPredicate.ult, own, end)
        entry = arith.select(present, own, first)
        row = _search(position, entry, high, start=low)
    keep = [own.owner.operation, entry.owner.operation]
    first.replace_all_uses_except(entry, keep)
    parallel.regions[0].blocks[0].arguments[0].replace_all_uses_with(row)
    _split(loop, member, present)
    parallel.erase()
    return outer
