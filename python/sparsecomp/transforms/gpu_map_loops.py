"""Pass ``sparse-iter-gpu-map-loops``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import defined_within
from sparsecomp.lowering import hints
from sparsecomp.transforms._entry_split import balanced_form, map_entries_balanced
from sparsecomp.transforms._lane_dot import entry_sum, map_sum_entries
from sparsecomp.transforms._lane_reduction import map_sum_rows, static_lanes, sum_loop
from sparsecomp.transforms._nonzero_split import form, split
from sparsecomp.transforms.base import SparsecompPass

#: Threads per block along (x, y): rows alone, or (columns, rows).
ROWS_PER_BLOCK = 128
COLUMN_LANES, ROWS_PER_COLUMN_BLOCK = 32, 4
#: CUDA's limit on the threads of one block.
MAX_THREADS = 1024
#: Ops a column loop may hold for its iterations to be independent (with the
#: store/load checks below); anything else keeps the loop inside its thread.
_SAFE_PREFIXES = ("arith.", "math.", "index.")
_SAFE_OPS = {"memref.load", "memref.store", "memref.atomic_rmw", "memref.dim", "scf.for",
             "scf.if", "scf.yield"}  # fmt: skip
#: Writes: value, memref, indices (an atomic add of a part that shares rows, too).
_WRITES = ("memref.store", "memref.atomic_rmw")


def _hinted_lanes(loop: ir.Operation, default: int) -> int:
    """Lanes per row where the loop's rows have at least ``sparse_iter.min_row_entries``
    entries (hyb's rest): the largest power of 2 up to that bound, at most 32."""
    if hints.MIN_ROW_ENTRIES not in loop.attributes:
        return default
    least = ir.IntegerAttr(loop.attributes[hints.MIN_ROW_ENTRIES]).value
    lanes = 1
    while lanes * 2 <= min(least, 32):
        lanes *= 2
    return max(lanes, default)


def _mapping(*processors: str) -> ir.ArrayAttr:
    return ir.ArrayAttr.get(
        [
            ir.Attribute.parse(
                f"#gpu.loop_dim_map<processor = {p}, map = (d0) -> (d0), bound = (d0) -> (d0)>"
            )
            for p in processors
        ]
    )


def _ops(root: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _independent_columns(loop: ir.Operation, parallel: ir.Operation) -> bool:
    """Whether the iterations of ``loop`` (an scf.for in a row loop) touch disjoint data.

    True when it has no results, bounds defined outside the row loop, only
    plain arithmetic, loads and stores, every store indexed by the loop's
    induction variable with the other indices fixed in the loop, and loads of
    stored buffers only at the very indices stored.
    """
    if len(loop.results) or any(defined_within(v, parallel) for v in loop.operands[:3]):
        return False
    iv = loop.regions[0].blocks[0].arguments[0]
    stores: dict[ir.Value, list[list[ir.Value]]] = {}
    inner = _ops(loop)[1:]
    for op in inner:
        if op.name not in _SAFE_OPS and not op.name.startswith(_SAFE_PREFIXES):
            return False
        if op.name == "memref.atomic_rmw" and any(True for _ in op.results[0].uses):
            return False
        if op.name in _WRITES:
            indices = list(op.operands[2:])
            if iv not in indices:
                return False
            if not all(i == iv or not defined_within(i, loop) for i in indices):
                return False
            stores.setdefault(op.operands[1], []).append(indices)
    for op in inner:
        if op.name == "memref.load":
            written = stores.get(op.operands[0])
            if written is not None and list(op.operands[1:]) not in written:
                return False
    return True


def _column_loop(parallel: ir.Operation) -> ir.Operation | None:
    """The scf.for that is the whole body of ``parallel``, if its columns are independent."""
    body = [o.operation for o in parallel.regions[0].blocks[0].operations]
    if len(body) == 2 and body[0].name == "scf.for" and body[1].name == "scf.reduce":
        if _independent_columns(body[0], parallel):
            return body[0]
    return None


def _const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _trips(lower: ir.Value, upper: ir.Value, step: ir.Value) -> ir.Value:
    return arith.ceildivsi(arith.subi(upper, lower), step)


def _parallel(bounds: list[ir.Value], processors: tuple[str, ...]) -> tuple[ir.Operation, list]:
    """``scf.parallel`` from 0 to ``bounds`` step 1 mapped onto ``processors``; (op, ivs)."""
    zero, one = _const(0), _const(1)
    op = scf.ParallelOp([], [zero] * len(bounds), bounds, [one] * len(bounds), [])
    block = op.region.blocks.append(*[ir.IndexType.get()] * len(bounds))
    with ir.InsertionPoint(block):
        scf.ReduceOp([], 0)
    op.operation.attributes["mapping"] = _mapping(*processors)
    return op.operation, list(block.arguments)


@dataclasses.dataclass(frozen=True)
class GpuMapLoopsPass(SparsecompPass):
    """Map each outermost ``scf.parallel`` row loop onto GPU blocks and threads.

    Runs after ``sparse-iter-parallelize`` in ``sparsecomp-cuda-schedule``;
    ``convert-parallel-loops-to-gpu`` then turns the mapped nest into a
    ``gpu.launch``. Two schedules:

    - **rows**: one row per thread, ``rows-per-block`` (128) threads per
      block; a guard skips the last block's extra threads.
    - **columns x rows**, when the whole body of the row loop is a loop over
      a dense dimension whose iterations touch disjoint data (SpMM's output
      columns: every store indexed by the column, buffers read only where the
      same iteration writes): 32 columns on the lanes of a warp (`thread_x`,
      so that the dense operand's rows and the output are read and written
      coalesced) times 4 rows per block (`thread_y`); blocks tile both, on
      one grid dimension (a row's column tiles are neighbouring blocks).
      The guard is on the row alone, so that a warp's lanes stay together:
      a lane past the last column computes the last column (its index
      clamped) and its writes are skipped.
      Options ``column-lanes`` and ``rows-per-column-block`` change the 32
      and the 4 (a block has at most 1024 threads); ``columns=false`` keeps
      every row on one thread (the baseline schedule of the benchmarks).
    - **lanes per row**, when the row's body sums over the row's entries
      into one f32 (SpMV; also a sum that skips ELL padding, ``scf.if``
      adding or keeping): ``reduction-lanes`` (8) lanes share a row, read
      its entries coalesced, and add their partial sums with shuffles
      (:mod:`._lane_reduction`); 128 threads per block; 0 turns it off.
      A sum over a constant number of slots (an ELL bucket of width ``w``)
      gets ``w`` lanes (rounded up to a power of 2, at most 32): one slot
      each. A row loop marked ``sparse_iter.min_row_entries = n`` (hyb's
      rest) gets the largest power of 2 up to ``n`` lanes, at most 32.
    - **a warp per row, lanes over each entry's dot product**, when the row's
      body loops over its entries and each entry sums over a dense dimension
      into one f32 that it then stores (SDDMM; not when the columns schedule
      applies): the warp walks the row's entries 4 at a time, a group of 8
      lanes per entry; lane ``l`` of a group takes ``k = l, l + 8, ...`` of
      both dense rows (whole sectors), a butterfly adds the group's sums and
      its lane 0 stores (:mod:`._lane_dot`); 4 rows per block. Off with
      ``reduction-lanes=0``.
    - **entries shared out evenly** (``balance=nonzeros``; default
      ``rows``), for a row sum read from positions (CSR SpMV) and stored to
      its row: each of the ``ceil(m / 128) * 128`` threads takes an equal
      share of the entries, finds its first row by a binary search, and adds
      each row's part into the output with an atomic add (the output zeroed
      first, by a launch of its own, unless the sum starts from it), so the
      longest row no longer sets the time; where the row's body is a loop
      over output columns with such a sum (SpMM), a warp takes each share
      and its lanes 32 columns (:mod:`._nonzero_split`); where it is SDDMM's
      (a dot product per entry, stored at the entry), a warp takes each
      share, 4 entries at a time on groups of 8 lanes as by rows, each
      group finding its entry's row by a binary search (:mod:`._entry_split`:
      no atomics, each entry written once).

    A nest of several dimensions (a 2-D output's fill, which stayed on the
    host before) is first a row loop over its first dimension with a loop
    over the others inside: the columns schedule where those are independent.
    Row loops with results or a non-index type are left to the upstream
    mapping passes.

    Before:

    ```mlir
    scf.parallel (%i) = (%c0) to (%m) step (%c1) {
      scf.for %j = %c0 to %n step %c1 {
        ... memref.store %v, %C[%i, %j] : memref<?x?xf32>
      }
      scf.reduce
    }
    ```

    After (mapping attributes abbreviated):

    ```mlir
    scf.parallel (%b) = (%c0) to (%nb * %mb) step (%c1) {
      %bj = %b mod %nb, %bi = %b div %nb
      scf.parallel (%tj, %ti) = (%c0, %c0) to (%c32, %c4) step (%c1, %c1) {
        %i = %bi * 4 + %ti, %j = min(%bj * 32 + %tj, %n - 1)
        scf.if (%i < %m) { ... scf.if (%bj * 32 + %tj < %n) { memref.store %v, %C[%i, %j] } }
        scf.reduce
      } {mapping = [thread_x, thread_y]}
      scf.reduce
    } {mapping = [block_x]}
    ```
    """

    NAME = "sparse-iter-gpu-map-loops"
    rows_per_block: int = ROWS_PER_BLOCK
    column_lanes: int = COLUMN_LANES
    rows_per_column_block: int = ROWS_PER_COLUMN_BLOCK
    columns: bool = True
    reduction_lanes: int = 8
    balance: str = "rows"

    def __post_init__(self) -> None:
        if self.balance not in ("rows", "nonzeros"):
            raise ValueError(f"balance must be 'rows' or 'nonzeros', got '{self.balance}'")
        if self.reduction_lanes not in (0, 1, 2, 4, 8, 16, 32):
            raise ValueError(
                "reduction-lanes must be 0 (off) or a power of 2 up to 32, "
                f"got {self.reduction_lanes}"
            )
        sizes = (self.rows_per_block, self.column_lanes, self.rows_per_column_block)
        if min(sizes) <= 0:
            raise ValueError(f"block sizes must be > 0, got {', '.join(map(str, sizes))}")
        threads = (self.rows_per_block, self.column_lanes * self.rows_per_column_block)
        if max(threads) > MAX_THREADS:
            raise ValueError(f"a block has at most {MAX_THREADS} threads, got {max(threads)}")

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        candidates = [
            o
            for o in _ops(op)
            if o.name == "scf.parallel"
            and "mapping" not in o.attributes
            and not self._nested(o)
            and len(o.results) == 0
        ]
        loops = [o if len(o.regions[0].blocks[0].arguments) == 1 else _rows(o) for o in candidates]
        for loop in loops:
            kept = {n: loop.attributes[n] for n in hints.ALL if n in loop.attributes}
            outer = self._map_one(loop)
            for name, value in kept.items():  # for sparse-iter-horizontal-fusion
                outer.attributes[name] = value

    def _map_one(self, loop: ir.Operation) -> ir.Operation:
        """Map one row loop by the first schedule that fits; the new block loop."""
        if self.balance == "nonzeros" and (found := form(loop)) is not None:
            outer, fill = split(loop, found, _parallel)
            if fill is not None:
                columns = (self.column_lanes, self.rows_per_column_block)
                if len(fill.regions[0].blocks[0].arguments) == 1:
                    self._map(fill, self.rows_per_block, None)
                else:
                    self._map(_rows(fill), self.rows_per_block, columns)
            return outer
        summed = sum_loop(loop) if self.reduction_lanes else None
        if summed is not None:
            lanes = static_lanes(summed, _hinted_lanes(loop, self.reduction_lanes))
            return map_sum_rows(loop, summed, lanes, _parallel)
        blocks = (self.column_lanes, self.rows_per_column_block) if self.columns else None
        if blocks is None or _column_loop(loop) is None:
            dots = entry_sum(loop) if self.reduction_lanes else None
            if dots is not None and self.balance == "nonzeros":
                if (bounds := balanced_form(loop, dots[0])) is not None:
                    return map_entries_balanced(loop, *dots, *bounds, _parallel)
            if dots is not None:
                return map_sum_entries(loop, *dots, _parallel)
        return self._map(loop, self.rows_per_block, blocks)

    @staticmethod
    def _nested(op: ir.Operation) -> bool:
        parent = op.parent
        while parent is not None and parent.name != "func.func":
            if parent.name == "scf.parallel":
                return True
            parent = parent.parent
        return False

    @staticmethod
    def _map(
        loop: ir.Operation, rows_per_block: int, column_block: tuple[int, int] | None
    ) -> ir.Operation:
        columns = _column_loop(loop) if column_block is not None else None
        row_lower, row_upper, row_step = loop.operands[0], loop.operands[1], loop.operands[2]
        with ir.InsertionPoint(loop), loop.location:
            rows = _trips(row_lower, row_upper, row_step)
            if columns is None:
                tiles = [_const(rows_per_block)]
                trips = [rows]
            else:
                col_lower, col_upper, col_step = columns.operands[:3]
                assert column_block is not None
                tiles = [_const(column_block[0]), _const(column_block[1])]
                trips = [_trips(col_lower, col_upper, col_step), rows]
            grid = [arith.ceildivsi(t, s) for t, s in zip(trips, tiles, strict=True)]
            # One grid dimension, x (up to 2^31 - 1 blocks; y and z stop at 65535,
            # fewer than a big matrix's row blocks): a block's column tile is its
            # index mod the tiles, so a row's tiles run side by side.
            total = grid[0] if len(grid) == 1 else arith.muli(grid[0], grid[1])
            outer, (block,) = _parallel([total], ("block_x",))
        with ir.InsertionPoint.at_block_terminator(outer.regions[0].blocks[0]), loop.location:
            block_ids = (
                [block]
                if len(grid) == 1
                else [arith.remui(block, grid[0]), arith.divui(block, grid[0])]
            )
            threads = ("thread_x", "thread_y")[: len(grid)]
            inner, thread_ids = _parallel(tiles, threads)
        with ir.InsertionPoint.at_block_terminator(inner.regions[0].blocks[0]), loop.location:
            flat = [
                arith.addi(arith.muli(b, s), t)
                for b, s, t in zip(block_ids, tiles, thread_ids, strict=True)
            ]
            inside = arith.cmpi(arith.CmpIPredicate.slt, flat[-1], trips[-1])
            guard = scf.IfOp(inside)
            with ir.InsertionPoint(guard.then_block):
                yield_ = scf.YieldOp([])
        with ir.InsertionPoint(yield_), loop.location:
            row = arith.addi(row_lower, arith.muli(flat[-1], row_step))
            if columns is not None:
                # A column past the end computes the last column's value and
                # skips its writes: the warp stays converged (whole-warp
                # collectives such as sparse-iter-gpu-stage-structure's may follow).
                col_lower, _, col_step = columns.operands[:3]
                last = arith.subi(trips[0], _const(1))
                clamped = arith.minsi(flat[0], last)
                column = arith.addi(col_lower, arith.muli(clamped, col_step))
                column_inside = arith.cmpi(arith.CmpIPredicate.slt, flat[0], trips[0])
        row_body = loop.regions[0].blocks[0]
        row_body.arguments[0].replace_all_uses_with(row)
        source = row_body
        if columns is not None:
            column_body = columns.regions[0].blocks[0]
            column_body.arguments[0].replace_all_uses_with(column)
            source = column_body
        for inner_op in list(source.operations):
            inner_op = inner_op.operation
            if inner_op.name in ("scf.reduce", "scf.yield"):
                continue
            inner_op.move_before(yield_.operation)
        loop.erase()
        if columns is not None:
            for write in [o for o in _ops(guard.operation) if o.name in _WRITES]:
                _guard(write, column_inside)
        return outer


def _rows(loop: ir.Operation) -> ir.Operation:
    """``scf.parallel (%i, %j, ...)`` as ``scf.parallel (%i) { scf.for %j { ... } }``: a
    nest of several dimensions (a 2-D output's fill) maps like a row loop, its inner
    dimensions as a column loop (the columns schedule where they are independent)."""
    n = len(loop.regions[0].blocks[0].arguments)
    lower, upper, step = (list(loop.operands[k * n : (k + 1) * n]) for k in range(3))
    with ir.InsertionPoint(loop), loop.location:
        rows = scf.ParallelOp([], lower[:1], upper[:1], step[:1], [])
        row_block = rows.region.blocks.append(ir.IndexType.get())
        ivs = [row_block.arguments[0]]
        with ir.InsertionPoint(row_block):
            at = ir.InsertionPoint(row_block)
            for d in range(1, n):
                with at:
                    inner = scf.ForOp(lower[d], upper[d], step[d])
                ivs.append(inner.induction_variable)
                at = ir.InsertionPoint(inner.body)
                with at:
                    done = scf.YieldOp([])
                at = ir.InsertionPoint(done)
            with ir.InsertionPoint(row_block):
                scf.ReduceOp([], 0)
    body = loop.regions[0].blocks[0]
    for old, new in zip(body.arguments, ivs, strict=True):
        old.replace_all_uses_with(new)
    for o in list(body.operations):
        if o.operation.name != "scf.reduce":
            o.operation.move_before(done.operation)
    for name in hints.ALL:
        if name in loop.attributes:
            rows.operation.attributes[name] = loop.attributes[name]
    loop.erase()
    return rows.operation


def _guard(op: ir.Operation, condition: ir.Value) -> None:
    """Put ``op`` (a write whose result, if any, is unused) under ``scf.if condition``."""
    with ir.InsertionPoint(op), op.location:
        branch = scf.IfOp(condition)
        with ir.InsertionPoint(branch.then_block):
            done = scf.YieldOp([])
    op.move_before(done.operation)
