"""A 2:4 x dense product on sparse tensor cores, block-tiled through shared memory.

:func:`nm_spmm_staged` writes the same private function as
:func:`.mma_sp_kernels.nm_spmm` (``out = A B + cin``, ``A`` 2:4 f16 in the
``mma_sp_m16n8k16`` layout: ``values`` each row's kept pairs, ``meta`` 8
words per 16-row tile and k tile of 16 columns), structured as a GEMM is on
tensor cores (CUTLASS's threadblock / warp / instruction tiles):

- **A block tile of the output** (``BM x BN``, 128 x 128 by default) per
  block of ``WM x WN`` warps (2 x 4), each warp ``RT`` 16-row MMA tiles by
  ``T`` 8-column ones (4 x 4: 64 x 32, 16 MMAs per k tile; 64 accumulators
  a lane: 197-200 registers, no spills and 30 KB of shared memory on
  sm_80/sm_90, where 4 x 8 tiles a warp took 255 and spilled 152 bytes).
- **Per step of 32 columns of k**, the block's threads copy A's stored
  values for its rows (``BM x 16`` f16) and B's ``32 x BN`` slice into
  shared memory in 16-byte chunks, meet at a barrier, and every warp reads
  its fragments from there: each B value read from global memory once per
  block instead of once per warp, and each A value once per column block.
- **Two stages, copies in flight** (CUTLASS's multistage mainloop with two
  stages): where ``k`` is a multiple of 16, ``n`` of 8 and both operands
  start on 16 bytes (every row then does), each chunk is a ``cp.async`` of
  16 bytes (``nvgpu.device_async_copy``, L1 bypassed, zeros filled past the
  matrix), and the copies of step ``s + 1`` go into the other stage's
  buffers before step ``s``'s MMAs, waited for (``cp.async.wait_group 1``)
  only at the next step. Otherwise a chunk is per-element masked loads
  stored by the thread, in the same two-stage loop.
- **Fragments without conflicts.** B's MMA tile ``j`` holds the warp's
  columns ``T c + j`` (``c = 0..7``), as in :mod:`.mma_sp_kernels`, so a
  lane's elements of one k row for all ``T`` tiles are adjacent: one shared
  load of ``2 T`` bytes per k row. The shared rows are padded (B by 8 halves, A to 24
  halves) so that the lanes of a quarter warp touch 32 distinct banks.
- **Metadata staged too** (32-bit words, the layout ``mma.sp`` needs): per
  step the block's row tiles' words of both k tiles (16 words a row tile,
  64 contiguous bytes) come in as 16-byte chunks from its first threads,
  where every lane loaded a word per row tile and k tile before (4 x 2 a
  step); each lane reads its word from shared memory. 64-bit words are
  read from global memory, a word per lane.

Not yet: ``ldmatrix`` (a lane's B elements already come as one shared
load a k row), more than two stages, tile shapes per problem size.

The kernel is defined after bufferization: ``sparse-iter-gpu-tensorize``
(on tensors) calls a declaration (:func:`staged_declaration`), and
``sparse-iter-gpu-kernel-bodies`` gives it this body (its name says its
tiling: :meth:`NmMmaStaged.from_name`). Bufferization's deallocation
refuses ``gpu.barrier`` (MLIR declares no memory effects for it) and would
give the launch's workgroup buffers ownership arguments.
"""

from __future__ import annotations

import dataclasses
import re

from sparsecomp.lowering.mma_emit import Emitter, open_launch, sizes
from sparsecomp.lowering.mma_sp_kernels import (
    PAD_WORD,
    WORDS_PER_TILE,
    accumulators,
    lane_mask,
    masked_load,
    meta_word,
    mma_sp,
    store_accumulators,
)

#: Columns of k a block stages per step (two k tiles of ``m16n8k16``), and the A values
#: (2 of every 4) a row keeps of them.
STEP_K, STEP_VALUES = 32, 16
#: Halves per shared-memory row of A (16 values, padded), and B's row padding.
A_ROW, B_PAD = 24, 8
#: Halves per staged chunk (16 bytes).
CHUNK = 8


@dataclasses.dataclass(frozen=True)
class NmMmaStaged:
    """One block-tiled 2:4 x dense kernel: metadata word type, warps and their tiles."""

    meta: str = "i32"
    warps_m: int = 2
    warps_n: int = 4
    #: 16-row MMA tiles per warp.
    row_tiles: int = 4
    #: 8-column MMA tiles per warp (a lane's B elements of a k row: 2, 4 or 8 halves).
    tiles: int = 4
    acc: str = "f32"

    def __post_init__(self) -> None:
        if self.tiles not in (2, 4, 8):
            raise ValueError(f"a staged 2:4 warp takes 2, 4 or 8 column tiles, not {self.tiles}")
        if self.row_tiles % self.warps_n or self.tiles % self.warps_m:
            raise ValueError(
                f"the block's {self.threads} threads copy whole chunks: warps_n "
                f"({self.warps_n}) must divide row_tiles ({self.row_tiles}) and warps_m "
                f"({self.warps_m}) tiles ({self.tiles})"
            )

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def block_rows(self) -> int:
        return 16 * self.row_tiles * self.warps_m

    @property
    def block_cols(self) -> int:
        return 8 * self.tiles * self.warps_n

    @property
    def name(self) -> str:
        acc = "" if self.acc == "f32" else f"_acc{self.acc}"
        return (f"__sparse_iter_nm_mma_sp_2x4_f16{acc}_{self.meta}_staged_"
                f"m{self.warps_m}x{self.row_tiles}n{self.warps_n}x{self.tiles}")  # fmt: skip

    @classmethod
    def from_name(cls, name: str) -> NmMmaStaged | None:
        """The kernel called ``name`` (:attr:`name`), or None for another name."""
        found = _NAME.fullmatch(name)
        if found is None:
            return None
        acc, meta, wm, rt, wn, tiles = found.groups()
        try:
            return cls(meta, int(wm), int(wn), int(rt), int(tiles), acc or "f32")
        except ValueError:
            return None


_NAME = re.compile(r"__sparse_iter_nm_mma_sp_2x4_f16(?:_acc(f16))?_(i32|i64)_staged_"
                   r"m(\d+)x(\d+)n(\d+)x(\d+)")  # fmt: skip


def _signature(spec: NmMmaStaged) -> str:
    return (f"func.func private @{spec.name}(%values: memref<?xf16>, "
            f"%meta: memref<?x{spec.meta}>, %b: memref<?x?xf16>, "
            f"%cin: memref<?x?x{spec.acc}>, %out: memref<?x?x{spec.acc}>)")  # fmt: skip


def staged_declaration(spec: NmMmaStaged) -> str:
    """The kernel's declaration, which the module holds until bufferization is done."""
    return _signature(spec)


def nm_spmm_staged(spec: NmMmaStaged) -> str:
    """The private function ``@spec.name(values, meta, b, cin, out)``."""
    e = Emitter("f16", spec.acc)
    e.zero = e("arith.constant 0.0 : f16")
    m, n, k = sizes(e)
    groups = e(f"arith.ceildivsi {k}, {e.c(4)}", "index")
    k_tiles = e(f"arith.ceildivsi {groups}, {e.c(4)}", "index")
    steps = e(f"arith.ceildivsi {k}, {e.c(STEP_K)}", "index")
    mtiles = e(f"arith.ceildivsi {m}, {e.c(16)}", "index")
    staged_meta = spec.meta == "i32"
    space = "#gpu.address_space<workgroup>"
    shape = _Shape(
        m, n, k, groups, k_tiles, mtiles, _aligned(e, groups, n),
        _starts_on_16_bytes(e, "%meta", f"memref<?x{spec.meta}>", 4),
        f"memref<2x{spec.block_rows}x{A_ROW}xf16, {space}>",
        f"memref<2x{STEP_K}x{spec.block_cols + B_PAD}xf16, {space}>",
        f"memref<2x{spec.block_rows // 16}x{2 * WORDS_PER_TILE}xi32, {space}>",
        staged_meta,
    )  # fmt: skip
    gx = e(f"arith.ceildivsi {m}, {e.c(spec.block_rows)}", "index")
    gy = e(f"arith.ceildivsi {n}, {e.c(spec.block_cols)}", "index")
    buffers = f"%sa : {shape.a_tile}, %sb : {shape.b_tile}"
    buffers += f", %sm : {shape.m_tile}" if staged_meta else ""
    warp = open_launch(e, gx, gy, spec.threads, buffers)
    wm = e(f"arith.divui {warp}, {e.c(spec.warps_n)}", "index")
    wn = e(f"arith.remui {warp}, {e.c(spec.warps_n)}", "index")
    block = _Block(e.mul("%bx", spec.block_rows), e.mul("%by", spec.block_cols),
                   e.mul("%bx", spec.block_rows // 16))  # fmt: skip
    local_row = e.mul(wm, 16 * spec.row_tiles)  # the warp's first row in the block
    local_col = e.mul(wn, 8 * spec.tiles)
    first_col = e(f"arith.addi {block.col}, {local_col}", "index")
    first_tile = e.add(block.tile, e.mul(wm, spec.row_tiles))
    own = [e.add(first_tile, r) for r in range(spec.row_tiles)]
    first_rows = [e.mul(tile, 16) for tile in own]
    accs = [a for first in first_rows
            for a in accumulators(e, first, first_col, m, n, spec.tiles)]  # fmt: skip
    _stage(e, spec, shape, block, e.c(0), e.c(0))  # the first step's copies
    e.raw("nvvm.cp.async.commit.group")
    count = len(accs)
    results = f"%v{e.count}"
    e.count += 1
    carried = ", ".join(f"%acc{j} = {a}" for j, a in enumerate(accs))
    e.begin(f"{results}:{count} = scf.for %s = {e.c(0)} to {steps} step {e.c(1)} "
            f"iter_args({carried}) -> ({', '.join([e.acc_vector] * count)}) {{")  # fmt: skip
    current_stage = e(f"arith.andi %s, {e.c(1)}", "index")
    following = e.add("%s", 1)
    e.begin(f"scf.if {e.below(following, steps)} {{")
    _stage(e, spec, shape, block, following, e(f"arith.xori {current_stage}, {e.c(1)}", "index"))
    e.raw("nvvm.cp.async.commit.group")
    e.raw("nvvm.cp.async.wait.group 1")  # this step's copies are done, the next in flight
    e.end("} else {")
    e.indent += 2
    e.raw("nvvm.cp.async.wait.group 0")
    e.end()
    e.raw("gpu.barrier")  # every thread's copies of this step are visible
    current = [f"%acc{j}" for j in range(count)]
    for half in (0, 1):
        tile = e.add(e.mul("%s", 2), half)
        bs = _b_fragments(e, spec, shape, current_stage, local_col, half)
        step = []
        for r, row_tile in enumerate(own):
            if staged_meta:
                local_tile = e.add(e.mul(wm, spec.row_tiles), r)
                meta = _staged_word(e, shape, current_stage, local_tile, half)
            else:
                meta = meta_word(e, spec.meta, k_tiles, mtiles, row_tile, tile)
            a = _a_fragment(e, shape, current_stage, e.add(local_row, 16 * r), half)
            step += [mma_sp(e, a, b, current[r * spec.tiles + j], meta)
                     for j, b in enumerate(bs)]  # fmt: skip
        current = step
    e.raw("gpu.barrier")  # the step after next copies into this stage's buffers
    e.raw(f"scf.yield {', '.join(current)} : {', '.join([e.acc_vector] * count)}")
    e.end()
    for r, first in enumerate(first_rows):
        tiles = [f"{results}#{r * spec.tiles + j}" for j in range(spec.tiles)]
        store_accumulators(e, tiles, first, first_col, m, n)
    e.raw("gpu.terminator")
    e.end()
    e.raw("return")
    return e.function(_signature(spec) + " {")


@dataclasses.dataclass(frozen=True)
class _Shape:
    """SSA names of the sizes and alignment flags, and the shared buffers' types."""

    m: str
    n: str
    k: str
    groups: str
    k_tiles: str
    mtiles: str
    aligned: str  # values and B: every row on 16 bytes
    meta_aligned: str
    a_tile: str
    b_tile: str
    m_tile: str
    staged_meta: bool


@dataclasses.dataclass(frozen=True)
class _Block:
    """SSA names of the block's first row, column and 16-row tile."""

    row: str
    col: str
    tile: str


def _stage(e: Emitter, spec: NmMmaStaged, shape: _Shape, block: _Block, step: str,
           stage: str) -> None:  # fmt: skip
    """Copy step ``step``'s tiles (A's values, B, the metadata words) into the buffers of
    stage ``stage``."""
    _stage_a(e, spec, shape, block, step, stage)
    _stage_b(e, spec, shape, block, step, stage)
    if shape.staged_meta:
        _stage_meta(e, spec, shape, block, step, stage)


def _aligned(e: Emitter, groups: str, n: str) -> str:
    """Whether every row of A's values (2 ``groups`` halves) and of B (``n``) starts on
    16 bytes, so that whole chunks are single aligned copies: both strides multiples of 8
    halves and both first elements on 16 bytes (a caller's view may start anywhere)."""
    a_rows = e(f"arith.remui {groups}, {e.c(4)}", "index")
    b_rows = e(f"arith.remui {n}, {e.c(CHUNK)}", "index")
    rows = e(f"arith.cmpi eq, {e(f'arith.ori {a_rows}, {b_rows}', 'index')}, {e.c(0)}", "index")
    starts = [_starts_on_16_bytes(e, "%values", "memref<?xf16>", 2),
              _starts_on_16_bytes(e, "%b", "memref<?x?xf16>", 2)]  # fmt: skip
    both = e(f"arith.andi {starts[0]}, {starts[1]}", "i1")
    return e(f"arith.andi {rows}, {both}", "i1")


def _starts_on_16_bytes(e: Emitter, memref: str, ty: str, itemsize: int) -> str:
    """Whether ``memref``'s first element lies on 16 bytes."""
    rank = ty.count("?")
    base = f"%v{e.count}"
    e.count += 1
    element = ty.rsplit("x", 1)[1].rstrip(">")
    strided = ", ".join(["index"] * (1 + 2 * rank))
    e.raw(f"{base}:{2 + 2 * rank} = memref.extract_strided_metadata {memref} : {ty} -> "
          f"memref<{element}>, {strided}")  # fmt: skip
    pointer = e(f"memref.extract_aligned_pointer_as_index {memref} : {ty} -> index")
    start = e(f"arith.addi {pointer}, {e.mul(f'{base}#1', itemsize)}", "index")
    offset = e(f"arith.remui {start}, {e.c(16)}", "index")
    return e(f"arith.cmpi eq, {offset}, {e.c(0)}", "index")


def _copy_chunk(e: Emitter, source: str, source_ty: str, at: list[str], inside: str,
                mask: str, guard: str, aligned: str, target: str,
                target_ty: str) -> None:  # fmt: skip
    """16 bytes of ``source`` at ``at`` into shared ``target``: a ``cp.async`` where
    ``aligned`` (of nothing, zeros filled, outside the matrix), else per-element ``mask``
    loads under ``guard`` stored by the thread."""
    vector = f"vector<{CHUNK}xf16>"
    e.begin(f"scf.if {aligned} {{")
    count = e(f"arith.select {inside}, {e.c(CHUNK)}, {e.c(0)}", "index")
    safe = [e(f"arith.select {inside}, {i}, {e.c(0)}", "index") for i in at]
    e(f"nvgpu.device_async_copy {source}[{', '.join(safe)}], {target}, {CHUNK}, {count} "
      f"{{bypassL1}} : {source_ty} to {target_ty}")  # fmt: skip
    e.end("} else {")
    e.indent += 2
    loaded = masked_load(e, source, source_ty, ", ".join(at), mask, guard, vector)
    e.raw(f"vector.store {loaded}, {target} : {target_ty}, {vector}")
    e.end()


def _stage_a(e: Emitter, spec: NmMmaStaged, shape: _Shape, block: _Block, step: str,
             stage: str) -> None:  # fmt: skip
    """A's 16 stored values of step ``step`` for each of the block's rows: chunk ``c`` is
    row ``c / 2``'s values ``8 (c % 2) ..``, 4 groups of k."""
    for i in range(2 * spec.block_rows // spec.threads):
        chunk = e.add("%tx", spec.threads * i)
        local = e(f"arith.shrui {chunk}, {e.c(1)}", "index")
        part = e(f"arith.andi {chunk}, {e.c(1)}", "index")
        row = e(f"arith.addi {block.row}, {local}", "index")
        first_group = e.add(e.mul(step, STEP_VALUES // 2), e.mul(part, 4))
        at = e.mul(e.add(e(f"arith.muli {row}, {shape.groups}", "index"), first_group), 2)
        row_inside = e.below(row, shape.m)
        inside = e(f"arith.andi {row_inside}, {e.below(first_group, shape.groups)}", "i1")
        mask = lane_mask(e, first_group, 4, shape.groups, repeat=2)
        target = f"%sa[{stage}, {local}, {e.mul(part, CHUNK)}]"
        _copy_chunk(e, "%values", "memref<?xf16>", [at], inside, mask, row_inside,
                    shape.aligned, target, shape.a_tile)  # fmt: skip


def _stage_b(e: Emitter, spec: NmMmaStaged, shape: _Shape, block: _Block, step: str,
             stage: str) -> None:  # fmt: skip
    """B's rows ``32 step ..`` and the block's columns: chunk ``c`` is k row
    ``c / (BN / 8)``'s columns ``8 (c % (BN / 8)) ..``."""
    per_row = spec.block_cols // CHUNK
    for i in range(STEP_K * per_row // spec.threads):
        chunk = e.add("%tx", spec.threads * i)
        local = e(f"arith.divui {chunk}, {e.c(per_row)}", "index")
        column = e.mul(e(f"arith.remui {chunk}, {e.c(per_row)}", "index"), CHUNK)
        krow = e(f"arith.addi {e.mul(step, STEP_K)}, {local}", "index")
        col = e(f"arith.addi {block.col}, {column}", "index")
        krow_inside = e.below(krow, shape.k)
        inside = e(f"arith.andi {krow_inside}, {e.below(col, shape.n)}", "i1")
        mask = lane_mask(e, col, CHUNK, shape.n)
        target = f"%sb[{stage}, {local}, {column}]"
        _copy_chunk(e, "%b", "memref<?x?xf16>", [krow, col], inside, mask, krow_inside,
                    shape.aligned, target, shape.b_tile)  # fmt: skip


def _stage_meta(e: Emitter, spec: NmMmaStaged, shape: _Shape, block: _Block, step: str,
                stage: str) -> None:  # fmt: skip
    """The words of step ``step``'s two k tiles for each of the block's row tiles (row tile
    major, 16 words a row): chunk ``c`` is row tile ``c / 4``'s words ``4 (c % 4) ..``,
    contiguous in ``%meta``; padding indices past the matrix."""
    chunks = spec.block_rows // 16 * 4
    vector = "vector<4xi32>"
    for i in range(-(-chunks // spec.threads)):
        chunk = e.add("%tx", spec.threads * i)
        e.begin(f"scf.if {e.below(chunk, e.c(chunks))} {{")
        local = e(f"arith.shrui {chunk}, {e.c(2)}", "index")
        part = e(f"arith.andi {chunk}, {e.c(3)}", "index")
        row_tile = e(f"arith.addi {block.tile}, {local}", "index")
        tile = e.add(e.mul(step, 2), e(f"arith.shrui {part}, {e.c(1)}", "index"))
        first = e(f"arith.muli {row_tile}, {shape.k_tiles}", "index")
        at = e.add(e.mul(e(f"arith.addi {first}, {tile}", "index"), WORDS_PER_TILE),
                   e.mul(e(f"arith.andi {part}, {e.c(1)}", "index"), 4))  # fmt: skip
        inside = e(f"arith.andi {e.below(row_tile, shape.mtiles)}, "
                   f"{e.below(tile, shape.k_tiles)}", "i1")  # fmt: skip
        target = f"%sm[{stage}, {local}, {e.mul(part, 4)}]"
        copy = e(f"arith.andi {inside}, {shape.meta_aligned}", "i1")
        e.begin(f"scf.if {copy} {{")
        e(f"nvgpu.device_async_copy %meta[{at}], {target}, 4 {{bypassL1}} : memref<?xi32> to "
          f"{shape.m_tile}")  # fmt: skip
        e.end("} else {")
        e.indent += 2
        words = e(f"scf.if {inside} -> ({vector}) {{")
        e.indent += 2
        loaded = e(f"vector.load %meta[{at}] : memref<?xi32>, {vector}")
        e.raw(f"scf.yield {loaded} : {vector}")
        e.end("} else {")
        e.indent += 2
        pad = e(f"arith.constant dense<{PAD_WORD}> : {vector}")
        e.raw(f"scf.yield {pad} : {vector}")
        e.end()
        e.raw(f"vector.store {words}, {target} : {shape.m_tile}, {vector}")
        e.end()
        e.end()


def _staged_word(e: Emitter, shape: _Shape, stage: str, local_tile: str, half: int) -> str:
    """The lanes' metadata word of the block's row tile ``local_tile`` and the step's k
    tile ``half`` (word ``g`` of its 8), as the ``vector<2xi16>`` the MMA takes."""
    column = e.add(e.group, WORDS_PER_TILE * half)
    word = e(f"memref.load %sm[{stage}, {local_tile}, {column}] : {shape.m_tile}")
    wide = e(f"vector.broadcast {word}", "i32 to vector<1xi32>")
    return e(f"vector.bitcast {wide}", "vector<1xi32> to vector<2xi16>")


def _b_fragments(e: Emitter, spec: NmMmaStaged, shape: _Shape, stage: str, local_col: str,
                 half: int) -> list[str]:  # fmt: skip
    """Each column tile's B fragment of the step's k tile ``half``: the ISA's ``b_i`` at k
    ``2t + (i % 2) + 8 (i // 2)``, column ``g`` of the tile (``T g + j`` of the warp)."""
    tiles = spec.tiles
    col = e(f"arith.addi {local_col}, {e.mul(e.group, tiles)}", "index")
    rows = []
    for i in range(4):
        krow = e.add(e.mul(e.thread, 2), 16 * half + (i % 2) + 8 * (i // 2))
        rows.append(e(f"vector.load %sb[{stage}, {krow}, {col}] {{alignment = {2 * tiles} : "
                      f"i64}} : {shape.b_tile}, vector<{tiles}xf16>"))  # fmt: skip
    fragments = []
    for j in range(tiles):
        elems = [e(f"vector.extract {r}[{j}]", f"f16 from vector<{tiles}xf16>") for r in rows]
        fragments.append(e(f"vector.from_elements {', '.join(elems)}", "vector<2x2xf16>"))
    return fragments


def _a_fragment(e: Emitter, shape: _Shape, stage: str, local_row: str, half: int) -> str:
    """The A fragment of the 16-row tile at block row ``local_row``, k tile ``half`` of the
    step: stored values ``8 half + 2t, + 1`` of rows ``g`` and ``g + 8``."""
    col = e.add(e.mul(e.thread, 2), 8 * half)
    parts = []
    for offset in (0, 8):
        row = e.add(e(f"arith.addi {local_row}, {e.group}", "index"), offset)
        pair = e(f"vector.load %sa[{stage}, {row}, {col}] {{alignment = 4 : i64}} : "
                 f"{shape.a_tile}, vector<2xf16>")  # fmt: skip
        parts += [e(f"vector.extract {pair}[{i}]", "f16 from vector<2xf16>") for i in (0, 1)]
    return e(f"vector.from_elements {', '.join(parts)}", "vector<2x2xf16>")
