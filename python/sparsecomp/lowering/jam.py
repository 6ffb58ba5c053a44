"""Unroll-and-jam of a block's rows: SpMM over BSR with every row of a block in registers.

In ``C[i, j] += A[i, k] * B[k, j]`` over BSR ``A`` (levels ``i floordiv R``,
``k floordiv C`` compressed, ``i mod R``, ``k mod C``), the plain nest
(:mod:`.plan`) hoists the output chunk of row ``i`` inside the block loop:
each block reads and writes ``R`` output chunks, and each vector of ``B``
it loads feeds one row only. Jammed, the ``R`` rows of the block row are
unrolled and hoisted *above* the block loop, which is legal because the
output's indices (block row, ``r``, the vector chunk) do not depend on the
block's column:

.. code-block:: text

    for block row ib (parallel):
      for chunk j0 (U vectors of lanes):
        acc[r][u] = C[ib*R + r, j0 + u*lanes ...]   r < R, u < U (or the fill's constant)
        for block q in row ib (compressed):
          for c < C:
            b[u] = B[kb*C + c, j0 + u*lanes ...]       loaded once per (q, c)
            acc[r][u] += A[q, r, c] * b[u]             r unrolled: R x U FMAs
        C[ib*R + r, ...] = acc[r][u]

The rows of a partial last block row (``m`` not a multiple of ``R``) past the
edge keep accumulators too, read and written through an all-false mask at a
row that exists, so one nest serves every block row. Each output element is
read and written once, so a constant-filled output starts from its constant.

The accumulators take ``R x U`` vector registers; ``U`` (the vector chunk's
unroll) shrinks from ``unroll`` so that they fit three quarters of the
target's vector registers (:func:`accumulators`), leaving the rest for the
``U`` vectors of ``B`` and the broadcast values. Blocks of more rows than
that keep the plain nest. On a 2-core AVX-512 Xeon (3072x768 weight with
30% of its blocks kept, times a 768x1024 ``B``, f32, 512-bit vectors,
``unroll=8``; dense ``torch.matmul`` 19-25 ms), the plain nest and the
jammed one took 79 / 18 ms for BSR 16x1, 53 / 20 ms for 8x1, 50 / 23 ms
for 4x1, 41 / 21 ms for 8x2, 28 / 22 ms for 4x4 and 21 / 18 ms for 8x8,
with results equal bit for bit (each output element sums its products in
the same order); a budget of 16 or 32 registers instead of 24 was no faster.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparsecomp.lowering.plan import Plan


def accumulators(registers: int) -> int:
    """How many of ``registers`` vector registers the accumulators may take."""
    return registers * 3 // 4


@dataclass(frozen=True)
class Jam:
    """The jammed levels of a plan: the block loop at step ``step``, driver
    level ``block`` (whose coordinate the output does not use), then the row
    level ``rows`` (a ``dense`` ``i mod R`` level) with ``size`` rows;
    ``unroll`` vectors per row."""

    step: int
    block: int
    rows: int
    size: int
    unroll: int


def find_jam(plan: Plan, unroll: int, registers: int) -> Jam | None:
    """The :class:`Jam` of ``plan`` for a target with ``registers`` vector
    registers, or None where the plain nest is kept.

    It applies to a dense-output nest (vectorized, or scalar) whose hoist point follows a
    ``dense`` ``mod`` level of static size ``R >= 2`` (its ``floordiv`` level
    outside the loop before it), that loop being a driver level the output
    does not index, and whose remaining steps are ``dense`` levels (the
    columns of a block): SpMM over BSR with blocks of two rows or more, and
    SpMV (scalar: one accumulator per row of the block).
    """
    scalar = plan.vector_dim < 0  # SpMV over BSR: one accumulator per row
    if plan.vector_reduction or plan.sparse_output:
        return None
    if not scalar and not plan.output.uses(plan.vector_dim):
        return None
    steps, layout, h = plan.steps, plan.layout, plan.hoist
    if h < 2 or steps[h - 1].kind != "level" or steps[h - 2].kind != "level":
        return None
    rows, block = steps[h - 1].level, steps[h - 2].level
    expr = layout.dim_to_lvl.results[rows]
    budget = accumulators(registers)
    if expr.op != "mod" or not 2 <= expr.const <= budget:
        return None
    if layout.levels[rows].name != "dense_fixed":
        return None
    dim = plan.level_dim(rows)
    outer = [
        s.level
        for s in steps[: h - 2]
        if s.kind == "level"
        and layout.dim_to_lvl.results[s.level].op == "floordiv"
        and plan.level_dim(s.level) == dim
    ]
    if not outer or plan.output.uses(plan.level_dim(block)):
        return None
    for s in steps[h:]:
        if s.kind != "level" or layout.levels[s.level].name != "dense_fixed":
            return None
        if plan.output.uses(plan.level_dim(s.level)):
            return None
    vectors = 1 if scalar else max(1, min(unroll, budget // expr.const))
    return Jam(h - 2, block, rows, expr.const, vectors)


#: rows of a :class:`Group`: one store of ``R`` elements per row of the output
GROUP_ROWS = 8


@dataclass(frozen=True)
class Group:
    """Rows of a row-by-row driver (CSR, ELL, n:m) grouped for a transposed
    output: ``size`` consecutive rows, each with ``unroll`` vectors of
    accumulators, all in registers until the group is stored."""

    size: int
    unroll: int


def find_group(plan: Plan, unroll: int, registers: int) -> Group | None:
    """The :class:`Group` of ``plan``, or None.

    It applies to a vectorized nest ``[rows, vector chunk, entries...]`` (a
    ``dense`` first level over plain rows ``i``, then the vectorized dense
    dimension ``j``, then the levels of a row's entries) writing a transposed output
    ``Y[j, i]``: ``Y = X W^T`` over CSR ``W``. Written a row at a time,
    ``Y``'s elements go one by one, a row of ``Y`` apart; grouped, the rows
    of a group run their entries one after another into their own
    accumulators, and each ``rows x lanes`` tile is transposed in registers
    and stored as one vector per row of ``Y``, as a jammed block row is.
    """
    if plan.vector_dim < 0 or plan.vector_reduction or plan.sparse_output:
        return None
    steps = plan.steps
    if len(steps) < 3 or plan.hoist != 2:
        return None
    rows, chunk, *entries = steps
    if rows.kind != "level" or chunk.kind != "dense":
        return None
    if any(s.kind != "level" or plan.output.uses(plan.level_dim(s.level)) for s in entries):
        return None
    if chunk.dim != plan.vector_dim:
        return None
    layout = plan.layout
    if layout.levels[rows.level].name != "dense_fixed":
        return None
    if layout.dim_to_lvl.results[rows.level].op != "id":
        return None
    if plan.output.dims != (plan.vector_dim, plan.level_dim(rows.level)):
        return None
    budget = accumulators(registers)
    return Group(GROUP_ROWS, max(1, min(unroll, budget // GROUP_ROWS)))
