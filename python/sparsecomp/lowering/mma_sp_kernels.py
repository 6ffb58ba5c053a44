"""A 2:4 x dense product on sparse tensor cores (``mma.sp``), as MLIR text.

:func:`nm_spmm` writes a private function that computes ``out = A B + cin``
for an f16 ``A`` whose rows keep 2 of every 4 values, stored with the
``mma.sp`` metadata of :mod:`sparsecomp.formats.mma_sp` (layout
``nm:2:4`` with ``nmMetadata = mma_sp_m16n8k16``): ``values`` holds each
row's kept pairs in order, ``meta`` the packed 2-bit indices, 8 words per
16-row tile and k tile of 16 columns, word ``g`` being what lanes ``4g ..
4g + 3`` pass.

A warp owns one 16-row tile and ``tiles`` groups of 8 output columns
(``warps`` warps per block, as for BSR, :mod:`.mma_kernels`). Per k tile
each lane loads its metadata word, the two kept values of its group in
rows ``g`` and ``g + 8`` (register 0 and 1 of the sparse A fragment, as the
PTX ISA lays it out for ``m16n8k16`` with ``.f16``) and its B fragment, and
the warp issues ``nvgpu.mma.sp.sync`` (sparsity selector 0, f32
accumulation). Rows and groups past the matrix read zero values (the
metadata is padded to whole tiles), and B's rows past ``k`` read zero.
"""

from __future__ import annotations

import dataclasses

from sparsecomp.lowering.mma_emit import ACC, Emitter, accumulator, guarded_load, store
from sparsecomp.targets.fragments import M16N8K16_F16

#: Dense columns per k tile of ``m16n8k16``; groups of 4 per k tile.
K_TILE, GROUPS_PER_TILE, WORDS_PER_TILE = 16, 4, 8


@dataclasses.dataclass(frozen=True)
class NmMma:
    """One 2:4 x dense product kernel: metadata word type and tiling."""

    meta: str = "i32"
    warps: int = 4
    tiles: int = 4

    @property
    def name(self) -> str:
        return f"__sparse_iter_nm_mma_sp_2x4_f16_{self.meta}_w{self.warps}t{self.tiles}"


def nm_spmm(spec: NmMma) -> str:
    """The private function ``@spec.name(values, meta, b, cin, out)``."""
    e = Emitter("f16")
    for v in (0, 1, 2, 3, 4, 8, 16, 32):
        e.c(v)
    e.zero = e("arith.constant 0.0 : f16")
    m = e(f"memref.dim %out, {e.c(0)}", "memref<?x?xf32>")
    n = e(f"memref.dim %out, {e.c(1)}", "memref<?x?xf32>")
    k = e(f"memref.dim %b, {e.c(0)}", "memref<?x?xf16>")
    groups = e(f"arith.ceildivsi {k}, {e.c(4)}", "index")
    k_tiles = e(f"arith.ceildivsi {groups}, {e.c(GROUPS_PER_TILE)}", "index")
    mtiles = e(f"arith.ceildivsi {m}, {e.c(16)}", "index")
    gx = e(f"arith.ceildivsi {mtiles}, {e.c(spec.warps)}", "index")
    gy = e(f"arith.ceildivsi {n}, {e.c(8 * spec.tiles)}", "index")
    e.begin(
        f"gpu.launch blocks(%bx, %by, %bz) in (%gx = {gx}, %gy = {gy}, %gz = {e.c(1)}) "
        f"threads(%tx, %ty, %tz) in (%sx = {e.c(32 * spec.warps)}, %sy = {e.c(1)}, "
        f"%sz = {e.c(1)}) {{"
    )
    lane = e(f"arith.remui %tx, {e.c(32)}", "index")
    e.group = e(f"arith.shrui {lane}, {e.c(2)}", "index")
    e.thread = e(f"arith.andi {lane}, {e.c(3)}", "index")
    mtile = e.add(e.mul("%bx", spec.warps), e(f"arith.divui %tx, {e.c(32)}", "index"))
    e.begin(f"scf.if {e.below(mtile, mtiles)} {{")
    first_row = e.mul(mtile, 16)
    columns = [e.add(e.mul("%by", 8 * spec.tiles), 8 * j) for j in range(spec.tiles)]
    accs = [accumulator(e, first_row, col0, m, n) for col0 in columns]
    results = f"%v{e.count}"
    e.count += 1
    carried = ", ".join(f"%acc{j} = {a}" for j, a in enumerate(accs))
    e.begin(f"{results}:{spec.tiles} = scf.for %kt = {e.c(0)} to {k_tiles} step {e.c(1)} "
            f"iter_args({carried}) -> ({', '.join([ACC] * spec.tiles)}) {{")  # fmt: skip
    current = _k_tile(e, spec, mtile, first_row, columns, m, k, n, groups, k_tiles)
    e.raw(f"scf.yield {', '.join(current)} : {', '.join([ACC] * spec.tiles)}")
    e.end()
    for j, col0 in enumerate(columns):
        store(e, f"{results}#{j}", first_row, col0, m, n)
    e.end()
    e.raw("gpu.terminator")
    e.end()
    e.raw("return")
    head = (
        f"func.func private @{spec.name}(%values: memref<?xf16>, %meta: memref<?x{spec.meta}>, "
        "%b: memref<?x?xf16>, %cin: memref<?x?xf32>, %out: memref<?x?xf32>) {"
    )
    return "\n".join([head, *e.lines, "}"])


def _k_tile(e: Emitter, spec: NmMma, mtile: str, first_row: str, columns: list[str], m: str,
            k: str, n: str, groups: str, k_tiles: str) -> list[str]:  # fmt: skip
    """One k tile: the lane's metadata word, A pairs and B fragments, one MMA per column group."""
    tile = e.add(e(f"arith.muli {mtile}, {k_tiles}", "index"), "%kt")
    word_at = e.add(e.mul(tile, WORDS_PER_TILE), e.group)
    word = e(f"memref.load %meta[{word_at}]", f"memref<?x{spec.meta}>")
    if spec.meta != "i32":
        word = e(f"arith.trunci {word} : {spec.meta} to i32")
    as_vector = e(f"vector.broadcast {word}", "i32 to vector<1xi32>")
    meta = e(f"vector.bitcast {as_vector}", "vector<1xi32> to vector<2xi16>")
    group = e.add(e.mul("%kt", GROUPS_PER_TILE), e.thread)
    pairs = []
    for half in (0, 8):
        row = e.add(e.add(first_row, e.group), half)
        inside = e(f"arith.andi {e.below(row, m)}, {e.below(group, groups)}", "i1")
        at = e.mul(e.add(e(f"arith.muli {row}, {groups}", "index"), group), 2)
        name = e(f"scf.if {inside} -> (vector<2xf16>) {{")
        e.indent += 2
        loaded = e(f"vector.load %values[{at}]", "memref<?xf16>, vector<2xf16>")
        e.raw(f"scf.yield {loaded} : vector<2xf16>")
        e.end("} else {")
        e.indent += 2
        zero = e("arith.constant dense<0.0> : vector<2xf16>")
        e.raw(f"scf.yield {zero} : vector<2xf16>")
        e.end()
        pairs.append(name)
    elements = [e(f"vector.extract {p}[{i}]", "f16 from vector<2xf16>") for p in pairs
                for i in (0, 1)]  # fmt: skip
    a = e(f"vector.from_elements {', '.join(elements)}", "vector<2x2xf16>")
    b_frag = M16N8K16_F16.b
    k_first = e.mul("%kt", K_TILE)
    current = []
    for j, col0 in enumerate(columns):
        b_elements = []
        for i in range(b_frag.count):
            row_off, _ = b_frag.position(0, i)
            krow = e.add(e.add(k_first, e.mul(e.thread, b_frag.thread[0])), row_off)
            ncol = e.add(col0, e.group)
            b_elements.append(guarded_load(e, krow, ncol, k, n))
        b = e(f"vector.from_elements {', '.join(b_elements)}", "vector<2x2xf16>")
        current.append(e(
            f"nvgpu.mma.sp.sync ({a}, {b}, %acc{j}) metadata ({meta}) {{mmaShape = [16, 8, 16]}} "
            f": (vector<2x2xf16>, vector<2x2xf16>, {ACC}) -> {ACC}"))  # fmt: skip
    return current
