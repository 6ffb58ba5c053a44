"""Slices of the gathered rows: SpMM's ``B`` read a cache-sized slice at a time.

In ``C[i, j] += A[i, k] * B[k, j]`` over CSR ``A``, each stored ``A[i, k]``
reads row ``k`` of ``B``. When ``B`` does not fit the core's cache and the
rows of ``A`` are long (pruned weights, dense-ish blocks), every row of ``A``
streams most of ``B`` from the last-level cache or memory. Sliced, the nest
runs once per slice ``[k0, k1)`` of ``B``'s rows: each row of ``A`` visits
only its entries with ``k0 <= k < k1`` (found by binary search in the row's
sorted coordinates), so the slice of ``B`` the nest gathers stays in the
core's cache, and the output rows are read and written once per slice
instead of once. Unlike column panels (:meth:`NestEmitter.panels
<sparsecomp.lowering.nest.NestEmitter.panels>`), ``B``'s rows are still read
whole, as the prefetchers like, and ``A`` is read once in all.

The number of slices is chosen at run time from the operands: enough that a
slice of the gathered inputs fits the budget (``slice-bytes``), where their
rows are at least ``MIN_ROW_BYTES`` long (``K`` of 64 and more in f32), but
no more than leaves ``MIN_RUN`` entries per row and slice on average, so
matrices with short rows (graphs) run one slice, with no searches. Entries are
visited in the same order either way (slices ascend, a row's coordinates
are sorted), so the results are the same bit for bit. A row's range in
its slice is found once, before the loop over its vector chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.lowering.loops import (
    Carried,
    add,
    if_else,
    index,
    load_index,
    load_position,
    while_loop,
)
from sparsecomp.lowering.plan import Access, Plan

#: The default budget of a slice (``slice-bytes``), measured on a 2-core
#: Intel Xeon (2 MiB L2 per core, 480 MiB L3; the machine of the latest run in
#: docs/benchmarks.md, earlier runs had a 2-core EPYC). SpMM K=128,
#: median of 5 interleaved rounds, time over the unsliced kernel's at 256 KiB
#: / 512 KiB / 1 MiB: 2:4-pruned 4096^2 0.66 / 0.63 / 0.62, 16x16 blocks
#: 90% pruned 0.75 / 0.91 / 0.99, 90% magnitude-pruned 0.74 / 0.77 / 0.80,
#: uniform 1% 8192^2 0.57 at each; K=64: blocks 0.69 at 256 KiB, the others
#: 0.92-1.03.
DEFAULT_SLICE_BYTES = 1 << 18
#: The shortest gathered row (bytes) worth slicing for: with K=32 f32 rows of
#: ``B`` (128 bytes), two slices made uniform 1% 1.2-1.3x and 90%-pruned
#: 1.04x slower; a row's search then costs more than its entries' work.
MIN_ROW_BYTES = 256
#: The fewest entries a row keeps per slice, on average, for slicing to pay:
#: each row and slice re-reads and re-writes the row's output chunk.
MIN_RUN = 32


@dataclass(frozen=True)
class Cut:
    """Level ``level`` visits only coordinates in ``[lo, hi)``, a slice of them;
    ``first`` and ``last`` (``i1``) say whether it is the first or last slice
    (its lower or upper end needs no search). ``bounds``: the positions the
    current row's loop runs between, found once for all its vector chunks."""

    level: int
    lo: ir.Value
    hi: ir.Value
    first: ir.Value
    last: ir.Value
    bounds: tuple[ir.Value, ir.Value] | None = None


def sliced_level(plan: Plan, gathered: list[Access]) -> int | None:
    """The level whose coordinates pick the gathered rows, where slicing is exact.

    That is the innermost level, ``compressed`` (ordered, unique) with a
    plain dimension as its coordinate; the gathered inputs read rows at that
    dimension, and the output does not use it (it is a reduction: each
    output element takes the entries of every slice in turn).
    """
    layout = plan.layout
    if not gathered or plan.sparse_output or plan.vector_reduction:
        return None
    lv = len(layout.levels) - 1
    level = layout.levels[lv]
    if level.name != "compressed_varied" or level.nonordered or level.nonunique:
        return None
    if layout.dim_to_lvl.results[lv].op != "id":
        return None
    dim = plan.level_dim(lv)
    if dim in plan.output.dims or not all(dim in acc.dims for acc in gathered):
        return None
    steps = [s.level for s in plan.steps if s.kind == "level"]
    return lv if steps and steps[-1] == lv else None


def bytes_along(gathered: list[Access], dim: int) -> ir.Value:
    """Bytes of the gathered inputs at one index of ``dim``: their other extents'
    product times their element size, summed (a row of ``B`` along ``k``, a
    column along ``j``)."""
    total = index(0)
    for acc in gathered:
        ty = ir.RankedTensorType(acc.value.type)
        bits = getattr(ty.element_type, "width", 64)  # index: 64 bits
        size = index(max(bits // 8, 1))
        for d, each in enumerate(acc.dims):
            if each != dim:
                size = arith.muli(size, tensor.dim(acc.value, index(d)))
        total = add(total, size)
    return total


def gathered_rows(dim: int, gathered: list[Access]) -> tuple[ir.Value, ir.Value]:
    """``(rows, bytes per row)`` of the gathered inputs along ``dim``."""
    acc = gathered[0]
    rows = tensor.dim(acc.value, index(acc.dims.index(dim)))
    return rows, bytes_along(gathered, dim)


def slice_count(
    rows: ir.Value, per_row: ir.Value, pos: ir.Value, crd: ir.Value, budget: int
) -> ir.Value:
    """How many slices to run (at least one): the budget's where the gathered
    rows are ``MIN_ROW_BYTES`` or longer, capped by ``MIN_RUN`` entries per row
    and slice."""
    total = arith.muli(rows, per_row)
    long = arith.cmpi(arith.CmpIPredicate.uge, per_row, index(MIN_ROW_BYTES))
    want = arith.select(long, arith.ceildivui(total, index(budget)), index(1))
    parents = arith.subi(tensor.dim(pos, index(0)), index(1))
    entries = tensor.dim(crd, index(0))  # an estimate: reads no positions (see the guard)
    runs = arith.divui(entries, arith.maxui(arith.muli(parents, index(MIN_RUN)), index(1)))
    return arith.maxui(arith.minui(want, runs), index(1))


def lower_bound(crd: ir.Value, lo: ir.Value, hi: ir.Value, key: ir.Value) -> ir.Value:
    """The first position in ``[lo, hi)`` whose coordinate is ``>= key`` (else ``hi``).

    A binary search; every position it reads lies in ``[lo, hi)``, and its
    result in ``[lo, hi]`` whatever the coordinates hold.
    """

    def cond(args: Carried) -> tuple[ir.Value, Carried]:
        return arith.cmpi(arith.CmpIPredicate.ult, args[0], args[1]), args

    def step(args: Carried) -> Carried:
        a, b = args
        mid = arith.addi(a, arith.shrui(arith.subi(b, a), index(1)))
        below = arith.cmpi(arith.CmpIPredicate.slt, load_index(crd, mid), key)
        return [arith.select(below, add(mid, index(1)), a), arith.select(below, b, mid)]

    return while_loop([lo, hi], cond, step)[0]


def cut_range(crd: ir.Value, lo: ir.Value, hi: ir.Value, cut: Cut) -> tuple[ir.Value, ir.Value]:
    """The positions in ``[lo, hi)`` (one row) whose coordinates lie in the cut.

    The first slice starts at ``lo`` and the last ends at ``hi`` without a
    search (one slice: none at all). Written as ``max(first, lo)`` and
    ``min(last, hi)``: visibly inside the row's range, which is what
    ``sparse-iter-guard-coordinates`` checks (the searches stay inside it
    anyway).
    """
    idx = [lo.type]
    first = if_else(cut.first, idx, lambda: [lo], lambda: [lower_bound(crd, lo, hi, cut.lo)])[0]
    last = if_else(cut.last, idx, lambda: [hi], lambda: [lower_bound(crd, first, hi, cut.hi)])[0]
    return arith.maxui(first, lo), arith.minui(last, hi)


def row_cut(cut: Cut, pos: ir.Value, crd: ir.Value, parent: ir.Value) -> Cut:
    """``cut`` with the bounds of the row at ``parent`` (its positions in ``pos``)."""
    lo = load_position(pos, parent)
    hi = load_position(pos, add(parent, index(1)))
    return replace(cut, bounds=cut_range(crd, lo, hi, cut))
