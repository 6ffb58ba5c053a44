"""A 2:4 x dense product on sparse tensor cores (``mma.sp``), as MLIR text.

:func:`nm_spmm` writes a private function that computes ``out = A B + cin``
for an f16 ``A`` whose rows keep 2 of every 4 values, stored with the
``mma.sp`` metadata of :mod:`sparsecomp.formats.mma_sp` (layout
``nm:2:4`` with ``nmMetadata = mma_sp_m16n8k16``): ``values`` holds each
row's kept pairs in order, ``meta`` the packed 2-bit indices, 8 words per
16-row tile and k tile of 16 columns, word ``g`` being what lanes ``4g ..
4g + 3`` pass.

A warp owns ``row_tiles`` (R, 2 by default) consecutive 16-row tiles and
``tiles`` (T) MMA tiles of 8 output columns (``warps`` warps per block, as
for BSR, :mod:`.mma_kernels`): per k tile it loads the T B fragments once
and issues R x T MMAs on them, so B's global traffic is 1/R of one row tile
a warp (the emulator's count at 512^3: 27.8 MB with R = 1, 19.4 MB with
R = 2). Two things keep its global loads in whole 32-byte sectors:

- **Columns interleaved.** MMA tile ``j`` holds the warp's columns
  ``T n + j`` (``n = 0..7``), not ``8 j + n``: the product does not care
  which columns a tile holds as long as B and C agree, and so a lane's B
  elements for all T tiles are adjacent (one ``vector<T x f16>`` load per
  k row) and so are its C elements (``vector<2T x f32>``, two adjacent
  logical columns times T tiles).
- **A by shuffles.** Per step of two k tiles (8 groups, 32 bytes of a row)
  lane ``t`` of a quad loads groups ``2t, 2t + 1`` of rows ``g`` and ``g +
  8``; the A fragment wants group ``t`` of each k tile, which
  ``gpu.shuffle idx`` fetches from lane ``4g + t / 2`` (``+ 2`` for the
  second tile).

Per k tile the warp then issues ``nvgpu.mma.sp.sync`` (m16n8k16, sparsity
selector 0, f32 accumulation, or f16 where the product's result is f16)
with the lanes' metadata word. Rows, groups
and columns past the matrix read zero (masked loads; the metadata is padded
to whole tiles, and a k tile past the end gets padding indices) and stores
past it are masked.
"""

from __future__ import annotations

import dataclasses

from sparsecomp.lowering.mma_emit import Emitter, sizes, warp_launch

#: Groups of 4 columns per k tile of ``m16n8k16``, metadata words per tile.
GROUPS_PER_TILE, WORDS_PER_TILE = 4, 8
#: The metadata word of a k tile past the end: every group's indices [0, 1].
PAD_WORD = 0x44444444


@dataclasses.dataclass(frozen=True)
class NmMma:
    """One 2:4 x dense product kernel: metadata word type and tiling."""

    meta: str = "i32"
    warps: int = 4
    tiles: int = 4
    #: The accumulator's (and ``cin``'s, ``out``'s) element type: f32 or f16.
    acc: str = "f32"
    #: 16-row MMA tiles per warp: each B fragment a warp loads serves all of them.
    row_tiles: int = 2

    @property
    def name(self) -> str:
        acc = "" if self.acc == "f32" else f"_acc{self.acc}"
        rows = "" if self.row_tiles == 1 else f"r{self.row_tiles}"
        return (f"__sparse_iter_nm_mma_sp_2x4_f16{acc}_{self.meta}_w{self.warps}t{self.tiles}"
                f"{rows}")  # fmt: skip


def nm_spmm(spec: NmMma) -> str:
    """The private function ``@spec.name(values, meta, b, cin, out)``."""
    e = Emitter("f16", spec.acc)
    tiles = spec.tiles
    e.zero = e("arith.constant 0.0 : f16")
    m, n, k = sizes(e)
    groups = e(f"arith.ceildivsi {k}, {e.c(4)}", "index")
    k_tiles = e(f"arith.ceildivsi {groups}, {e.c(GROUPS_PER_TILE)}", "index")
    steps = e(f"arith.ceildivsi {k_tiles}, {e.c(2)}", "index")
    mtiles = e(f"arith.ceildivsi {m}, {e.c(16)}", "index")
    rows = spec.row_tiles
    group = warp_launch(e, e(f"arith.ceildivsi {mtiles}, {e.c(rows)}", "index"), n, spec.warps,
                        tiles)  # fmt: skip
    own = [e.add(e.mul(group, rows), r) for r in range(rows)]  # the warp's 16-row tiles
    first_rows = [e.mul(tile, 16) for tile in own]
    first_col = e.mul("%by", 8 * tiles)
    accs = [a for first in first_rows for a in accumulators(e, first, first_col, m, n, tiles)]
    count = len(accs)
    results = f"%v{e.count}"
    e.count += 1
    carried = ", ".join(f"%acc{j} = {a}" for j, a in enumerate(accs))
    e.begin(f"{results}:{count} = scf.for %s = {e.c(0)} to {steps} step {e.c(1)} "
            f"iter_args({carried}) -> ({', '.join([e.acc_vector] * count)}) {{")  # fmt: skip
    shape = _Shape(m, k, n, groups, k_tiles, mtiles, tuple(own), tuple(first_rows), first_col)
    current = [f"%acc{j}" for j in range(count)]
    for half in (0, 1):
        current = _k_tile(e, spec, shape, half, current)
    e.raw(f"scf.yield {', '.join(current)} : {', '.join([e.acc_vector] * count)}")
    e.end()
    for r, first in enumerate(first_rows):
        tile_accs = [f"{results}#{r * tiles + j}" for j in range(tiles)]
        store_accumulators(e, tile_accs, first, first_col, m, n)
    e.end()
    e.raw("gpu.terminator")
    e.end()
    e.raw("return")
    return e.function(
        f"func.func private @{spec.name}(%values: memref<?xf16>, %meta: memref<?x{spec.meta}>, "
        f"%b: memref<?x?xf16>, %cin: memref<?x?x{spec.acc}>, %out: memref<?x?x{spec.acc}>) {{"
    )


@dataclasses.dataclass(frozen=True)
class _Shape:
    """SSA names of the sizes and of this warp's place."""

    m: str
    k: str
    n: str
    groups: str
    k_tiles: str
    mtiles: str  # 16-row tiles of the matrix
    own: tuple[str, ...]  # the warp's tiles
    first_rows: tuple[str, ...]  # their first rows
    first_col: str


def lane_mask(e: Emitter, first: str, count: int, bound: str, repeat: int = 1) -> str:
    """``vector<count*repeat xi1>``: ``first + i < bound``, each repeated ``repeat`` times."""
    inside = [e.below(e.add(first, i), bound) for i in range(count)]
    bits = [b for b in inside for _ in range(repeat)]
    return e(f"vector.from_elements {', '.join(bits)}", f"vector<{len(bits)}xi1>")


def masked_load(e: Emitter, memref: str, ty: str, at: str, mask: str, guard: str,
                 vector: str) -> str:  # fmt: skip
    """``vector.maskedload`` of ``vector`` at ``memref[at]`` where ``guard``, else zeros."""
    name = e(f"scf.if {guard} -> ({vector}) {{")
    e.indent += 2
    zeros = e(f"arith.constant dense<0.0> : {vector}")
    lanes = vector.split("<")[1].split("x")[0]
    loaded = e(f"vector.maskedload {memref}[{at}], {mask}, {zeros} : {ty}, "
               f"vector<{lanes}xi1>, {vector} into {vector}")  # fmt: skip
    e.raw(f"scf.yield {loaded} : {vector}")
    e.end("} else {")
    e.indent += 2
    zeros = e(f"arith.constant dense<0.0> : {vector}")
    e.raw(f"scf.yield {zeros} : {vector}")
    e.end()
    return name


def _lane_columns(e: Emitter, first_col: str, tiles: int) -> str:
    """This lane's first C column: logical columns 2t, 2t+1 of every tile are adjacent."""
    return e.add(first_col, e.mul(e.thread, 2 * tiles))


def accumulators(e: Emitter, first_row: str, first_col: str, m: str, n: str,
                  tiles: int) -> list[str]:  # fmt: skip
    """Each MMA tile's C fragment, read from cin: one ``vector<2T>`` per row of the lane."""
    col = _lane_columns(e, first_col, tiles)
    rows = []
    for half in (0, 8):
        row = e.add(e.add(first_row, e.group), half)
        mask = lane_mask(e, col, 2 * tiles, n)
        rows.append(masked_load(e, "%cin", f"memref<?x?x{e.acc}>", f"{row}, {col}", mask,
                                 e.below(row, m), f"vector<{2 * tiles}x{e.acc}>"))  # fmt: skip
    accs = []
    for j in range(tiles):
        parts = [e(f"vector.extract {r}[{i}]", f"{e.acc} from vector<{2 * tiles}x{e.acc}>")
                 for r in rows for i in (j, tiles + j)]  # fmt: skip
        accs.append(e(f"vector.from_elements {', '.join(parts)}", e.acc_vector))
    return accs


def store_accumulators(e: Emitter, accs: list[str], first_row: str, first_col: str, m: str,
                       n: str) -> None:  # fmt: skip
    tiles = len(accs)
    col = _lane_columns(e, first_col, tiles)
    for register, half in ((0, 0), (1, 8)):
        row = e.add(e.add(first_row, e.group), half)
        parts = [e(f"vector.extract {acc}[{register}, {i}]", f"{e.acc} from {e.acc_vector}")
                 for i in (0, 1) for acc in accs]  # fmt: skip
        value = e(f"vector.from_elements {', '.join(parts)}", f"vector<{2 * tiles}x{e.acc}>")
        mask = lane_mask(e, col, 2 * tiles, n)
        e.begin(f"scf.if {e.below(row, m)} {{")
        e.raw(f"vector.maskedstore %out[{row}, {col}], {mask}, {value} : memref<?x?x{e.acc}>, "
              f"vector<{2 * tiles}xi1>, vector<{2 * tiles}x{e.acc}>")  # fmt: skip
        e.end()


def _as_i32(e: Emitter, pair: list[str]) -> str:
    halves = e(f"vector.from_elements {', '.join(pair)}", "vector<2xf16>")
    word = e(f"vector.bitcast {halves}", "vector<2xf16> to vector<1xi32>")
    return e(f"vector.extract {word}[0]", "i32 from vector<1xi32>")


def _as_pair(e: Emitter, word: str) -> list[str]:
    wide = e(f"vector.broadcast {word}", "i32 to vector<1xi32>")
    halves = e(f"vector.bitcast {wide}", "vector<1xi32> to vector<2xf16>")
    return [e(f"vector.extract {halves}[{i}]", "f16 from vector<2xf16>") for i in (0, 1)]


def _a_pairs(e: Emitter, shape: _Shape, row: str) -> tuple[str, str]:
    """This lane's groups 2t, 2t+1 of the step's 8 (one 8-byte load), as two i32 pairs."""
    first_group = e.add(e.mul("%s", 2 * GROUPS_PER_TILE), e.mul(e.thread, 2))
    mask = lane_mask(e, first_group, 2, shape.groups, repeat=2)
    at = e.mul(e.add(e(f"arith.muli {row}, {shape.groups}", "index"), first_group), 2)
    quad = masked_load(e, "%values", "memref<?xf16>", at, mask, e.below(row, shape.m),
                        "vector<4xf16>")  # fmt: skip
    halves = [e(f"vector.extract {quad}[{i}]", "f16 from vector<4xf16>") for i in range(4)]
    return _as_i32(e, halves[:2]), _as_i32(e, halves[2:])


def _shuffled(e: Emitter, pairs: tuple[str, str], tile: int) -> str:
    """Group ``t`` of k tile ``tile`` of the step: from lane ``4g + 2 tile + t / 2``."""
    half_thread = e(f"arith.shrui {e.thread}, {e.c(1)}", "index")
    source = e.add(e.add(e.mul(e.group, 4), 2 * tile), half_thread)
    offset = e(f"arith.index_cast {source} : index to i32")
    width = e("arith.constant 32 : i32")
    got = []
    for pair in pairs:
        name = f"%v{e.count}"
        e.count += 1
        e.raw(f"{name}:2 = gpu.shuffle idx {pair}, {offset}, {width} : i32")
        got.append(f"{name}#0")
    parity = e(f"arith.andi {e.thread}, {e.c(1)}", "index")
    odd = e(f"arith.cmpi eq, {parity}, {e.c(1)}", "index")
    return e(f"arith.select {odd}, {got[1]}, {got[0]}", "i32")


def _k_tile(e: Emitter, spec: NmMma, shape: _Shape, half: int, accs: list[str]) -> list[str]:
    """K tile ``2 s + half``: the B fragments once, then per row tile its metadata word and
    A fragment and one MMA per column tile."""
    tile = e.add(e.mul("%s", 2), half)
    bs = _b_fragments(e, spec, shape, tile)
    current = []
    for r, (own, first_row) in enumerate(zip(shape.own, shape.first_rows, strict=True)):
        meta = meta_word(e, spec.meta, shape.k_tiles, shape.mtiles, own, tile)
        registers = []
        for row_half in (0, 8):
            row = e.add(e.add(first_row, e.group), row_half)
            registers += _as_pair(e, _shuffled(e, _a_pairs(e, shape, row), half))
        a = e(f"vector.from_elements {', '.join(registers)}", "vector<2x2xf16>")
        for j, b in enumerate(bs):
            acc = accs[r * spec.tiles + j]
            current.append(mma_sp(e, a, b, acc, meta))
    return current


def meta_word(e: Emitter, meta: str, k_tiles: str, mtiles: str, own: str, tile: str) -> str:
    """The lanes' metadata word of row tile ``own`` and k tile ``tile`` (padding indices past
    the matrix), as the ``vector<2xi16>`` the MMA takes."""
    word_at = e.add(e.mul(e.add(e(f"arith.muli {own}, {k_tiles}", "index"), tile),
                          WORDS_PER_TILE), e.group)  # fmt: skip
    inside = e(f"arith.andi {e.below(tile, k_tiles)}, {e.below(own, mtiles)}", "i1")
    word = e(f"scf.if {inside} -> ({meta}) {{")
    e.indent += 2
    loaded = e(f"memref.load %meta[{word_at}]", f"memref<?x{meta}>")
    e.raw(f"scf.yield {loaded} : {meta}")
    e.end("} else {")
    e.indent += 2
    pad = e(f"arith.constant {PAD_WORD} : {meta}")
    e.raw(f"scf.yield {pad} : {meta}")
    e.end()
    if meta != "i32":
        word = e(f"arith.trunci {word} : {meta} to i32")
    return e(f"vector.bitcast {e(f'vector.broadcast {word}', 'i32 to vector<1xi32>')}",
             "vector<1xi32> to vector<2xi16>")  # fmt: skip


def mma_sp(e: Emitter, a: str, b: str, acc: str, meta: str) -> str:
    """One ``m16n8k16`` 2:4 MMA: ``acc + a b`` with the lanes' metadata word ``meta``."""
    return e(
        f"nvgpu.mma.sp.sync ({a}, {b}, {acc}) metadata ({meta}) {{mmaShape = [16, 8, 16]}} "
        f": (vector<2x2xf16>, vector<2x2xf16>, {e.acc_vector}) -> {e.acc_vector}"
    )


def _b_fragments(e: Emitter, spec: NmMma, shape: _Shape, tile: str) -> list[str]:
    """Each column tile's B fragment of k tile ``tile`` (a lane's elements of all tiles
    adjacent: one vector load per k row)."""
    tiles = spec.tiles
    b_col = e.add(shape.first_col, e.mul(e.group, tiles))
    b_rows = []
    for i in range(4):  # b_i: k = 2t + (i % 2) + 8 (i // 2), n = g (the ISA's m16n8k16 B)
        krow = e.add(e.add(e.mul(tile, 16), e.mul(e.thread, 2)), (i % 2) + 8 * (i // 2))
        mask = lane_mask(e, b_col, tiles, shape.n)
        b_rows.append(masked_load(e, "%b", "memref<?x?xf16>", f"{krow}, {b_col}", mask,
                                   e.below(krow, shape.k), f"vector<{tiles}xf16>"))  # fmt: skip
    fragments = []
    for j in range(tiles):
        elems = [e(f"vector.extract {r}[{j}]", f"f16 from vector<{tiles}xf16>") for r in b_rows]
        fragments.append(e(f"vector.from_elements {', '.join(elems)}", "vector<2x2xf16>"))
    return fragments
