"""A row sum's work split by stored entries, not rows (SpMV for power-law rows).

Used by ``sparse-iter-gpu-map-loops`` with ``balance=nonzeros``. Rows of a
power-law matrix range from none to a good part of all entries; a schedule
that gives each row its lanes waits for the longest row. Here the entries
are shared out evenly instead, as cuSPARSE's CSR partitioning and
merge-based SpMV do: with ``T`` threads (a row's worth: ``ceil(m / 128)``
blocks of 128) and ``nnz = pos[m]``, thread ``t`` takes entries ``[t E, t E
+ E)``, ``E = ceil(nnz / T)``. It finds the row of its first entry by a
binary search of the positions, walks its entries in order, adds each
entry's term to the current row's sum, and where the next entry starts a
new row adds the sum into the output row (``memref.atomic_rmw addf``: a row
split between threads gets a part from each), skipping empty rows. The
output is zeroed first by a launch of its own, unless the sum started
from the output's own value (``y[i] += ...``), which the atomic adds then
add to. Every thread does the same work whatever the row lengths: the
longest row no longer sets the time, for a binary search per thread and an
atomic add per row segment.

Where the row's body is a loop over independent output columns, each with
such a sum (SpMM), a warp takes the share instead of a thread, its 32 lanes
32 output columns: the lanes walk the same entries (so that
``sparse-iter-gpu-stage-structure`` stages them), each adding its column's
part of a row into ``C[r, j]``.

The form it takes: a row loop ``scf.parallel (%i) = (0) to (%m) step (1)``
whose body (or the body of its one column loop ``scf.for %j = 0 to %n step
1``, ``%n`` from outside the row loop) loads the row's bounds ``pos[%i]``
and ``pos[%i + 1]`` (cast to ``index``), sums over ``[lo, hi)`` step 1 in
one ``scf.for`` whose body uses no value of the row body but ``%i`` (and
``%j``), from ``0.0`` or from ``y[%i]`` (``C[%i, %j]``), and stores the sum
there; anything else keeps the row schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlir import ir
from mlir.dialects import arith, memref, scf

from sparsecomp.ir.walk import defined_within, preorder
from sparsecomp.transforms._lane_reduction import _ops, _reads_only, sums

#: Threads per block (one share each); with output columns, lanes x warps (a share each).
THREADS = 128
LANES, WARPS = 32, 4
_CASTS = ("arith.index_castui", "arith.index_cast")

Parallel = Callable[[list[ir.Value], tuple[str, ...]], tuple[ir.Operation, list[Any]]]


@dataclass
class _Form:
    """What the split needs of a row loop."""

    loop: ir.Operation  # the row's sum
    positions: ir.Value  # pos, rank 1
    cast: str | None  # the op that makes pos[...] an index, if any
    output: ir.Value  # y (rank 1), or C (rank 2) with a column loop
    accumulates: bool  # the sum starts from y[i] (C[i, j])
    column: ir.Operation | None  # the loop over output columns (SpMM), if any


def _owner(value: ir.Value) -> ir.Operation | None:
    if isinstance(value.owner, ir.Block):
        return None
    return value.owner.operation


def _constant(value: ir.Value) -> int | float | None:
    op = _owner(value)
    if op is None or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    return None


def _position(value: ir.Value) -> tuple[ir.Value, str | None, ir.Value] | None:
    """``(pos, cast, k)`` where ``value`` is ``cast(pos[k])`` (or ``pos[k]`` of an index
    memref)."""
    op = _owner(value)
    cast = None
    if op is not None and op.name in _CASTS:
        cast = op.name
        op = _owner(op.operands[0])
    if op is None or op.name != "memref.load" or len(op.operands) != 2:
        return None
    if cast is None and not isinstance(op.results[0].type, ir.IndexType):
        return None
    return op.operands[0], cast, op.operands[1]


def form(parallel: ir.Operation) -> _Form | None:
    """The row loop's parts where it has the form of the module docstring, else None."""
    if len(parallel.regions[0].blocks[0].arguments) != 1:
        return None
    lower, step = parallel.operands[0], parallel.operands[2]
    if _constant(lower) != 0 or _constant(step) != 1:
        return None
    row = parallel.regions[0].blocks[0].arguments[0]
    block = parallel.regions[0].blocks[0]
    body = _ops(block)
    column = None
    if len(body) == 2 and body[0].name == "scf.for" and not len(body[0].results):
        column = body[0]
        bounds = column.operands[:3]
        if _constant(bounds[0]) != 0 or _constant(bounds[2]) != 1:
            return None
        if defined_within(bounds[1], parallel):
            return None
        block = column.regions[0].blocks[0]
        body = _ops(block)
    loops = [op for op in body if op.name == "scf.for"]
    if len(loops) != 1 or not sums(loops[0]) or not _reads_only(body[: body.index(loops[0])]):
        return None
    loop = loops[0]
    span = row_bounds(loop, row)
    if span is None:
        return None
    after = body[body.index(loop) + 1 : -1]
    if len(after) != 1 or after[0].name != "memref.store":
        return None
    store = after[0]
    stored, output, indices = store.operands[0], store.operands[1], list(store.operands[2:])
    place = [row] if column is None else [row, column.regions[0].blocks[0].arguments[0]]
    if stored != loop.results[0] or indices != place:
        return None
    if ir.MemRefType(output.type).rank != len(place) or defined_within(output, parallel):
        return None
    init = loop.operands[3]
    accumulates = False
    if _constant(init) != 0.0:
        load = _owner(init)
        if load is None or load.name != "memref.load":
            return None
        if load.operands[0] != output or list(load.operands[1:]) != place:
            return None
        accumulates = True
    # the sum's body may read the row's (and column's) index, nothing else of the row body
    if not reads_only(loop, place, parallel):
        return None
    return _Form(loop, *span, output, accumulates, column)


def row_bounds(loop: ir.Operation, row: ir.Value) -> tuple[ir.Value, str | None] | None:
    """``(positions, cast)`` where ``loop`` runs from ``pos[row]`` to ``pos[row + 1]``
    step 1 (each bound cast to ``index`` by ``cast``, if any); else None."""
    if _constant(loop.operands[2]) != 1:
        return None
    first, last = _position(loop.operands[0]), _position(loop.operands[1])
    if first is None or last is None or first[:2] != last[:2] or first[2] != row:
        return None
    bump = _owner(last[2])
    if bump is None or bump.name != "arith.addi" or row not in list(bump.operands):
        return None
    if not any(_constant(v) == 1 for v in bump.operands):
        return None
    return first[0], first[1]


def reads_only(loop: ir.Operation, allowed: list[ir.Value], parallel: ir.Operation) -> bool:
    """Whether ``loop``'s body reads no value defined in ``parallel`` (the row loop) but
    ``allowed`` and its own."""
    for op in _ops(loop.regions[0].blocks[0]):
        for value in (v for inner in preorder(op) for v in inner.operands):
            if value in allowed or defined_within(value, loop):
                continue
            if defined_within(value, parallel):
                return False
    return True


def _const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def split(
    parallel: ir.Operation, found: _Form, build_parallel: Parallel
) -> tuple[ir.Operation, ir.Operation | None]:
    """Replace ``parallel`` by the split launch and, unless the sum accumulates, a zero
    fill of the output before it; returns the split's block loop and the fill (a plain
    ``scf.parallel`` over the output, for the caller to map)."""
    index = ir.IndexType.get()
    f32 = ir.F32Type.get()
    rows = parallel.operands[1]
    loop = found.loop
    column = found.column

    def position(k: ir.Value) -> ir.Value:
        value = memref.load(found.positions, [k])
        if found.cast is not None:
            value = ir.Operation.create(found.cast, results=[index], operands=[value]).result
        return value

    with ir.InsertionPoint(parallel), parallel.location:
        zero = arith.constant(f32, 0.0)
        fill = None if found.accumulates else _fill(found.output, zero)
        if column is None:
            blocks = arith.ceildivsi(rows, _const(THREADS))
            shares = arith.muli(blocks, _const(THREADS))
            outer, (block,) = build_parallel([blocks], ("block_x",))
        else:
            columns = column.operands[1]
            share_blocks = arith.ceildivsi(rows, _const(WARPS))
            tiles = arith.ceildivsi(columns, _const(LANES))
            shares = arith.muli(share_blocks, _const(WARPS))
            outer, (block,) = build_parallel([arith.muli(share_blocks, tiles)], ("block_x",))
    with ir.InsertionPoint.at_block_terminator(outer.regions[0].blocks[0]), parallel.location:
        if column is None:
            inner, (thread,) = build_parallel([_const(THREADS)], ("thread_x",))
        else:
            inner, (lane, slot) = build_parallel(
                [_const(LANES), _const(WARPS)], ("thread_x", "thread_y")
            )
    with ir.InsertionPoint.at_block_terminator(inner.regions[0].blocks[0]), parallel.location:
        if column is None:
            me = arith.addi(arith.muli(block, _const(THREADS)), thread)
            place: list[ir.Value] = []
            writes = None
        else:
            tile, share_block = arith.remui(block, tiles), arith.divui(block, tiles)
            me = arith.addi(arith.muli(share_block, _const(WARPS)), slot)
            j = arith.addi(arith.muli(tile, _const(LANES)), lane)
            writes = arith.cmpi(arith.CmpIPredicate.ult, j, columns)
            place = [arith.minui(j, arith.subi(columns, _const(1)))]
        total = position(rows)
        share = arith.ceildivui(total, shares)
        begin = arith.minui(arith.muli(me, share), total)
        end = arith.minui(arith.addi(begin, share), total)
        works = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, begin, end))
        with ir.InsertionPoint(works.then_block):
            start = _search(position, begin, rows)
            bound0 = position(arith.addi(start, _const(1)))
            walk = scf.ForOp(begin, end, _const(1), [start, bound0, zero])
            with ir.InsertionPoint(walk.body):
                here = walk.induction_variable
                row, bound, acc = walk.inner_iter_args
                new_row = arith.cmpi(arith.CmpIPredicate.uge, here, bound)
                moved = scf.IfOp(new_row, [index, index, f32], has_else=True)
                with ir.InsertionPoint(moved.then_block):
                    _add(acc, found.output, [row, *place], writes)
                    next_row = _advance(position, row, here)
                    scf.YieldOp([next_row, position(arith.addi(next_row, _const(1))), zero])
                with ir.InsertionPoint(moved.else_block):
                    scf.YieldOp([row, bound, acc])
                current, _, partial = moved.results
                done = scf.YieldOp([current, moved.results[1], partial])
            last, _, rest = walk.results
            _add(rest, found.output, [last, *place], writes)
            scf.YieldOp([])
    # the entry's term: the old sum's body, moved, reading the walk's entry, row and column
    old = loop.regions[0].blocks[0]
    old_ops = [o.operation for o in old.operations]
    for op in old_ops[:-1]:
        op.move_before(done.operation)
    old.arguments[0].replace_all_uses_with(here)
    old.arguments[1].replace_all_uses_with(partial)
    done.operation.operands[2] = old_ops[-1].operands[0]
    if column is not None:
        column.regions[0].blocks[0].arguments[0].replace_all_uses_with(place[0])
    parallel.regions[0].blocks[0].arguments[0].replace_all_uses_with(current)
    parallel.erase()
    return outer, fill


def _fill(output: ir.Value, zero: ir.Value) -> ir.Operation:
    """``scf.parallel`` storing ``zero`` to every element of ``output`` (rank 1 or 2)."""
    index = ir.IndexType.get()
    rank = ir.MemRefType(output.type).rank
    sizes = [memref.dim(output, _const(d)) for d in range(rank)]
    fill = scf.ParallelOp([], [_const(0)] * rank, sizes, [_const(1)] * rank, [])
    block = fill.region.blocks.append(*[index] * rank)
    with ir.InsertionPoint(block):
        memref.store(zero, output, list(block.arguments))
        scf.ReduceOp([], 0)
    return fill.operation


def _add(value: ir.Value, output: ir.Value, at: list[ir.Value], writes: ir.Value | None) -> None:
    """``output[at] += value``, atomically; only where ``writes`` (a column inside)."""
    if writes is None:
        memref.atomic_rmw(arith.AtomicRMWKind.addf, value, output, at)
        return
    guard = scf.IfOp(writes)
    with ir.InsertionPoint(guard.then_block):
        memref.atomic_rmw(arith.AtomicRMWKind.addf, value, output, at)
        scf.YieldOp([])


def _search(
    position: Callable[[ir.Value], ir.Value],
    entry: ir.Value,
    rows: ir.Value,
    start: ir.Value | None = None,
) -> ir.Value:
    """The row holding ``entry``: the largest ``r < rows`` with ``pos[r] <= entry``
    (``pos[start] <= entry < pos[rows]``), by halving ``[start, rows)`` (``start``: 0)."""
    index = ir.IndexType.get()
    search = scf.WhileOp([index, index], [start if start is not None else _const(0), rows])
    before = search.before.blocks.append(index, index)
    with ir.InsertionPoint(before):
        lo, hi = before.arguments
        wide = arith.cmpi(arith.CmpIPredicate.ugt, arith.subi(hi, lo), _const(1))
        scf.ConditionOp(wide, [lo, hi])
    after = search.after.blocks.append(index, index)
    with ir.InsertionPoint(after):
        lo, hi = after.arguments
        mid = arith.shrui(arith.addi(lo, hi), _const(1))
        below = arith.cmpi(arith.CmpIPredicate.ule, position(mid), entry)
        scf.YieldOp([arith.select(below, mid, lo), arith.select(below, hi, mid)])
    return search.results[0]


def _advance(position: Callable[[ir.Value], ir.Value], row: ir.Value, entry: ir.Value) -> ir.Value:
    """The row after ``row`` that holds ``entry`` (past empty rows)."""
    index = ir.IndexType.get()
    walk = scf.WhileOp([index], [arith.addi(row, _const(1))])
    before = walk.before.blocks.append(index)
    with ir.InsertionPoint(before):
        (candidate,) = before.arguments
        ended = arith.cmpi(
            arith.CmpIPredicate.ule, position(arith.addi(candidate, _const(1))), entry
        )
        scf.ConditionOp(ended, [candidate])
    after = walk.after.blocks.append(index)
    with ir.InsertionPoint(after):
        (candidate,) = after.arguments
        scf.YieldOp([arith.addi(candidate, _const(1))])
    return walk.results[0]
