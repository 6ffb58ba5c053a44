"""n:m sparse x dense products on the dense tensor cores, as MLIR text.

:func:`nm_dense_spmm` writes a private function that computes ``out = A B +
cin`` for ``A`` in an ``nm:N:M`` layout with its positions stored as
indices (:mod:`sparsecomp.formats.nm`: per row, each group of ``M``
columns keeps ``N`` values and their positions in the group), where the
sparse tensor cores do not serve it: 2:4 in f32 (``mma.sp`` takes tf32
only 1:2), or any ``N:M`` whose ``M`` divides the MMA's ``k`` (8 for tf32,
16 for f16; 1:2, 1:4, 2:8, 4:8 ...), with the indices rather than
``mma.sp`` metadata.

Each lane builds its A fragment of ``mma.sync`` (dense ``m16n8kK``) from
the compressed rows: element ``(row, col)`` is the value whose index in
group ``col / M`` equals ``col % M``, or zero, found among the group's
``N`` kept entries with selects. The MMA then multiplies ``M / N`` times
the products ``A`` holds, at the dense tensor cores' rate. A warp owns a
16-row tile and ``tiles`` groups of 8 output columns (``warps`` warps per
block), and walks ``k`` in MMA tiles; B's fragments are loaded with a
guard, C is read and written two adjacent columns per lane
(:mod:`.mma_emit`). f32 inputs run as tf32, f16 ones on ``m16n8k16``; the
accumulator is f32, or f16 for an f16 result.
"""

from __future__ import annotations

import dataclasses

from sparsecomp.lowering.mma_emit import (
    Emitter,
    accumulator,
    guarded_load,
    lane_offset,
    sizes,
    store,
    tf32_round,
    warp_launch,
)
from sparsecomp.targets.fragments import MmaShape, for_inputs


@dataclasses.dataclass(frozen=True)
class NmDenseMma:
    """One n:m x dense product kernel on dense MMAs: ratio, types and tiling."""

    n: int  # N kept
    m: int  # of every M
    element: str  # "f32" or "f16"
    crd: str  # the indices' element type
    warps: int = 4
    tiles: int = 4
    acc: str = "f32"
    #: Why a 2:4 product is here rather than on the sparse tensor cores ("" otherwise).
    why: str = dataclasses.field(default="", compare=False)

    @property
    def shape(self) -> MmaShape:
        return for_inputs(self.element)

    @staticmethod
    def fits(n: int, m: int, k: int) -> bool:
        """Whether ``n:m`` groups tile an MMA's ``k``: ``M`` divides it."""
        return 1 <= n <= m and k % m == 0

    @property
    def name(self) -> str:
        acc = "" if self.acc == "f32" else f"_acc{self.acc}"
        return (
            f"__sparse_iter_nm_mma_dense_{self.n}x{self.m}_{self.element}{acc}_{self.crd}_"
            f"w{self.warps}t{self.tiles}"
        )


def nm_dense_spmm(spec: NmDenseMma) -> str:
    """The private function ``@spec.name(values, indices, b, cin, out)``."""
    e = Emitter(spec.element, spec.acc)
    shape, el = spec.shape, spec.element
    e.zero = e(f"arith.constant 0.0 : {el}")
    rows, cols, k = sizes(e)
    groups = e(f"arith.ceildivsi {k}, {e.c(spec.m)}", "index")
    k_tiles = e(f"arith.ceildivsi {k}, {e.c(shape.k)}", "index")
    mtiles = e(f"arith.ceildivsi {rows}, {e.c(16)}", "index")
    mtile = warp_launch(e, mtiles, cols, spec.warps, spec.tiles)
    first_row = e.mul(mtile, 16)
    columns = [e.add(e.mul("%by", 8 * spec.tiles), 8 * j) for j in range(spec.tiles)]
    accs = [accumulator(e, first_row, col0, rows, cols) for col0 in columns]
    results = f"%v{e.count}"
    e.count += 1
    types = ", ".join([e.acc_vector] * spec.tiles)
    carried = ", ".join(f"%acc{j} = {a}" for j, a in enumerate(accs))
    e.begin(f"{results}:{spec.tiles} = scf.for %s = {e.c(0)} to {k_tiles} step {e.c(1)} "
            f"iter_args({carried}) -> ({types}) {{")  # fmt: skip
    first_k = e.mul("%s", shape.k)
    a_row = lane_offset(e, shape.a, 0)
    a_col = lane_offset(e, shape.a, 1)
    elements = []
    for i in range(shape.a.count):
        row_off, col_off = shape.a.position(0, i)
        row = e.add(e.add(first_row, a_row), row_off)
        col = e.add(e.add(first_k, a_col), col_off)
        elements.append(tf32_round(e, _expanded(e, spec, row, col, rows, groups)))
    atype = f"vector<{shape.a.registers}x{shape.a.per_register}x{el}>"
    btype = f"vector<{shape.b.registers}x{shape.b.per_register}x{el}>"
    a = e(f"vector.from_elements {', '.join(elements)}", atype)
    b_row = lane_offset(e, shape.b, 0)
    b_col = lane_offset(e, shape.b, 1)
    tf32 = ", tf32Enabled" if el == "f32" else ""
    current = []
    for j, col0 in enumerate(columns):
        b_elements = []
        for i in range(shape.b.count):
            row_off, col_off = shape.b.position(0, i)
            krow = e.add(e.add(first_k, b_row), row_off)
            ncol = e.add(e.add(col0, b_col), col_off)
            b_elements.append(tf32_round(e, guarded_load(e, krow, ncol, k, cols)))
        b = e(f"vector.from_elements {', '.join(b_elements)}", btype)
        types_in = f"({atype}, {btype}, {e.acc_vector}) -> {e.acc_vector}"
        current.append(e(f"nvgpu.mma.sync ({a}, {b}, %acc{j}) {{mmaShape = [16, 8, {shape.k}]"
                         f"{tf32}}} : {types_in}"))  # fmt: skip
    e.raw(f"scf.yield {', '.join(current)} : {types}")
    e.end()
    for j, col0 in enumerate(columns):
        store(e, f"{results}#{j}", first_row, col0, rows, cols)
    e.end()
    e.raw("gpu.terminator")
    e.end()
    e.raw("return")
    return e.function(
        f"func.func private @{spec.name}(%values: memref<?x{el}>, %indices: "
        f"memref<?x{spec.crd}>, %b: memref<?x?x{el}>, %cin: memref<?x?x{spec.acc}>, "
        f"%out: memref<?x?x{spec.acc}>) {{"
    )


def _expanded(e: Emitter, spec: NmDenseMma, row: str, col: str, rows: str, groups: str) -> str:
    """``A[row, col]``: the kept value of group ``col / M`` whose index is ``col % M``, or 0."""
    el = spec.element
    group = e(f"arith.divui {col}, {e.c(spec.m)}", "index")
    position = e(f"arith.remui {col}, {e.c(spec.m)}", "index")
    inside = e(f"arith.andi {e.below(row, rows)}, {e.below(group, groups)}", "i1")
    name = e(f"scf.if {inside} -> ({el}) {{")
    e.indent += 2
    first = e.mul(e.add(e(f"arith.muli {row}, {groups}", "index"), group), spec.n)
    found = e.zero
    for j in range(spec.n):
        at = e.add(first, j)
        value = e(f"memref.load %values[{at}]", f"memref<?x{el}>")
        index = e(f"memref.load %indices[{at}]", f"memref<?x{spec.crd}>")
        same = e(f"arith.cmpi eq, {e(f'arith.index_castui {index} : {spec.crd} to index')}, "
                 f"{position}", "index")  # fmt: skip
        found = e(f"arith.select {same}, {value}, {found}", el)
    e.raw(f"scf.yield {found} : {el}")
    e.end(f"}} else {{\n  scf.yield {e.zero} : {el}\n}}")
    return name
