"""BSR blocks smaller than an MMA tile on tensor cores, several per MMA, as MLIR text.

:func:`packed_bsr_spmm` writes a private function that computes ``out = A B
+ cin`` for ``A`` in BSR with ``R x C`` blocks too small for the tile
kernel of :mod:`.mma_kernels` (3x3, 4x4, 8x8, 16x4, 8x16 ...), whose
``C`` is at most the MMA's ``k`` (8 for tf32, 16 for f16) or a multiple
of it.

The MMA computes the transposed product, ``out^T = B^T A^T``, so that the
sparse operand is the MMA's narrow side:

- the MMA's ``n = 8`` are 8 rows of a block row (a *slice*; a block of
  fewer rows, or the last slice of one whose rows are not a multiple of 8,
  leaves the rest of ``n`` empty), its ``m = 16`` are 16 output columns,
  and its ``k`` runs over ``k // C`` consecutive stored blocks of the
  block row at once (3 columns: 2 blocks of a tf32 ``k = 8``, 2 columns
  left zero): virtual ``k`` index ``kk`` is column ``kk % C`` of the row's
  block ``p + kk / C``. Several small blocks thus fill one MMA's ``k``, and
  every lane gathers the rows of ``B`` its ``kk`` select (``crd[p + kk /
  C] * C + kk % C``); a block wider than ``k`` takes ``C / k`` MMAs;
- a warp owns one slice and ``tiles`` groups of 16 output columns; its
  A^T fragment (the MMA's B operand, read from the blocks' values) serves
  every group; ``warps`` warps per thread block take consecutive slices;
- blocks past the block row's end, rows past the block or the matrix and
  rows of ``B`` past ``k`` read zero; stores outside ``out`` are skipped.

f32 operands run as tf32 (``m16n8k8``, rounded to nearest, ties away, as
in :mod:`.mma_kernels`), f16 ones on ``m16n8k16``; the accumulator is f32,
or f16 where the result is f16.
"""

from __future__ import annotations

import dataclasses

from sparsecomp.lowering.mma_emit import Emitter, lane_offset, sizes, tf32_round, warp_launch
from sparsecomp.targets.fragments import Fragment, MmaShape, for_inputs


@dataclasses.dataclass(frozen=True)
class PackedBsrMma:
    """One small-block BSR x dense product kernel: block shape, types, tiling."""

    rows: int  # R
    cols: int  # C
    element: str  # "f32" or "f16"
    pos: str
    crd: str
    warps: int = 4
    tiles: int = 2
    acc: str = "f32"

    @property
    def shape(self) -> MmaShape:
        return for_inputs(self.element)

    @property
    def slices(self) -> int:
        """Slices of 8 rows (the MMA's ``n``) per block row; the last may be partial."""
        return -(-self.rows // 8)

    @property
    def per_step(self) -> int:
        """Blocks per MMA ``k``: ``k // C`` (the rest of ``k``, if any, reads zero), or 1
        where a block is ``C / k`` MMAs wide."""
        return max(1, self.shape.k // self.cols)

    @property
    def sub_steps(self) -> int:
        """MMAs along ``k`` per block: ``C / k`` where ``C > k``, else 1."""
        return max(1, self.cols // self.shape.k)

    @staticmethod
    def fits(rows: int, cols: int, k: int) -> bool:
        """Whether ``rows x cols`` blocks pack into MMAs with this ``k``: ``C <= k``, or a
        multiple of it."""
        return rows >= 1 and cols >= 1 and (cols <= k or cols % k == 0)

    @property
    def name(self) -> str:
        acc = "" if self.acc == "f32" else f"_acc{self.acc}"
        return (
            f"__sparse_iter_bsr_mma_packed_{self.rows}x{self.cols}_{self.element}{acc}_"
            f"{self.pos}_{self.crd}_w{self.warps}t{self.tiles}"
        )


def packed_bsr_spmm(spec: PackedBsrMma) -> str:
    """The private function ``@spec.name(pos, crd, values, b, cin, out)``."""
    e = Emitter(spec.element, spec.acc)
    shape = spec.shape
    e.zero = e(f"arith.constant 0.0 : {spec.element}")
    m, n, k = sizes(e)
    block_rows = e(f"arith.ceildivsi {m}, {e.c(spec.rows)}", "index")
    slices = e.mul(block_rows, spec.slices)
    # warp_launch tiles grid y by 8 * its ``tiles`` columns: 16 per group here.
    slice_id = warp_launch(e, slices, n, spec.warps, 2 * spec.tiles)
    block_row = e(f"arith.divui {slice_id}, {e.c(spec.slices)}", "index")
    in_block = e.mul(e(f"arith.remui {slice_id}, {e.c(spec.slices)}", "index"), 8)
    first_row = e.add(e.mul(block_row, spec.rows), in_block)
    columns = [e.add(e.mul("%by", 16 * spec.tiles), 16 * j) for j in range(spec.tiles)]
    end = _index(e, e(f"memref.load %pos[{e.add(block_row, 1)}]", f"memref<?x{spec.pos}>"),
                 spec.pos)  # fmt: skip
    start = _index(e, e(f"memref.load %pos[{block_row}]", f"memref<?x{spec.pos}>"), spec.pos)
    accs = [_c_fragment(e, shape.c, first_row, col0, in_block, spec, m, n) for col0 in columns]
    per_step = spec.per_step
    results = f"%v{e.count}"
    e.count += 1
    types = ", ".join([e.acc_vector] * spec.tiles)
    carried = ", ".join(f"%acc{j} = {a}" for j, a in enumerate(accs))
    e.begin(f"{results}:{spec.tiles} = scf.for %p = {start} to {end} step {e.c(per_step)} "
            f"iter_args({carried}) -> ({types}) {{")  # fmt: skip
    current = [f"%acc{j}" for j in range(spec.tiles)]
    for ks in range(spec.sub_steps):
        current = _step(e, spec, columns, in_block, end, k, n, ks, current)
    e.raw(f"scf.yield {', '.join(current)} : {types}")
    e.end()
    for j, col0 in enumerate(columns):
        _store(e, shape.c, f"{results}#{j}", first_row, col0, in_block, spec, m, n)
    e.end()
    e.raw("gpu.terminator")
    e.end()
    e.raw("return")
    return e.function(
        f"func.func private @{spec.name}(%pos: memref<?x{spec.pos}>, %crd: memref<?x{spec.crd}>, "
        f"%values: memref<?x{spec.element}>, %b: memref<?x?x{spec.element}>, "
        f"%cin: memref<?x?x{spec.acc}>, %out: memref<?x?x{spec.acc}>) {{"
    )


def _index(e: Emitter, value: str, ty: str) -> str:
    return e(f"arith.index_castui {value} : {ty} to index")


def _guarded(e: Emitter, inside: str, load: str, ty: str, zero: str) -> str:
    """``load`` (an op's text and its type suffix) where ``inside``, else ``zero``."""
    name = e(f"scf.if {inside} -> ({ty}) {{")
    e.indent += 2
    loaded = e(load)
    e.raw(f"scf.yield {loaded} : {ty}")
    e.end(f"}} else {{\n  scf.yield {zero} : {ty}\n}}")
    return name


def _both(e: Emitter, a: str, b: str) -> str:
    return e(f"arith.andi {a}, {b}", "i1")


def _position(e: Emitter, frag: Fragment, i: int) -> tuple[str, str]:
    """SSA ``(row, col)`` of element ``i`` of this lane's fragment."""
    row_off, col_off = frag.position(0, i)
    return e.add(lane_offset(e, frag, 0), row_off), e.add(lane_offset(e, frag, 1), col_off)


def _c_fragment(e: Emitter, frag: Fragment, first_row: str, col0: str, in_block: str,
                spec: PackedBsrMma, m: str, n: str) -> str:  # fmt: skip
    """The lane's accumulator (``cin^T``'s 16 x 8 tile: column ``mm``, row ``nn``)."""
    zero = e(f"arith.constant 0.0 : {spec.acc}")
    elements = []
    for i in range(frag.count):
        mm, nn = _position(e, frag, i)
        row, col = e.add(first_row, nn), e.add(col0, mm)
        inside = _both(e, _inside(e, row, m, col, n), _in_block(e, spec, in_block, nn))
        elements.append(_guarded(e, inside, f"memref.load %cin[{row}, {col}] : "
                                 f"memref<?x?x{spec.acc}>", spec.acc, zero))  # fmt: skip
    return e(f"vector.from_elements {', '.join(elements)}", e.acc_vector)


def _inside(e: Emitter, row: str, m: str, col: str, n: str) -> str:
    """Whether ``(row, col)`` is in ``out``."""
    return _both(e, e.below(row, m), e.below(col, n))


def _in_block(e: Emitter, spec: PackedBsrMma, in_block: str, nn: str) -> str:
    """Whether row ``nn`` of the slice at ``in_block`` is a row of the block."""
    if spec.rows % 8 == 0:
        return e("arith.constant true")
    return e.below(e.add(in_block, nn), e.c(spec.rows))


def _store(e: Emitter, frag: Fragment, acc: str, first_row: str, col0: str, in_block: str,
           spec: PackedBsrMma, m: str, n: str) -> None:  # fmt: skip
    for i in range(frag.count):
        mm, nn = _position(e, frag, i)
        row, col = e.add(first_row, nn), e.add(col0, mm)
        value = e(f"vector.extract {acc}[{i // frag.per_register}, {i % frag.per_register}]",
                  f"{spec.acc} from {e.acc_vector}")  # fmt: skip
        inside = _both(e, _inside(e, row, m, col, n), _in_block(e, spec, in_block, nn))
        e.begin(f"scf.if {inside} {{")
        e.raw(f"memref.store {value}, %out[{row}, {col}] : memref<?x?x{spec.acc}>")
        e.end()


def _where(e: Emitter, spec: PackedBsrMma, kk: str, ks: int) -> tuple[str, str]:
    """The stored block and its column that virtual ``k`` index ``kk`` of MMA ``ks`` of a
    step reads: block ``p + kk / C``, column ``kk % C``; or, for blocks wider than ``k``,
    block ``p``, column ``ks k + kk``."""
    if spec.sub_steps > 1:
        return "%p", e.add(kk, ks * spec.shape.k)
    block = e.add("%p", e(f"arith.divui {kk}, {e.c(spec.cols)}", "index"))
    return block, e(f"arith.remui {kk}, {e.c(spec.cols)}", "index")


def _step(e: Emitter, spec: PackedBsrMma, columns: list[str], in_block: str, end: str, k: str,
          n: str, ks: int, accs: list[str]) -> list[str]:  # fmt: skip
    """One MMA's ``k`` (blocks ``p .. p + k // C - 1``, or slice ``ks`` of block ``p``):
    an MMA per group of 16 columns, on ``accs``."""
    shape, el = spec.shape, spec.element
    block_size = spec.rows * spec.cols
    # The MMA's B operand: A^T (kk x nn), from the blocks' values.
    b_elements = []
    for i in range(shape.b.count):
        kk, nn = _position(e, shape.b, i)
        block, col_in_block = _where(e, spec, kk, ks)
        within = e.add(e.mul(e.add(in_block, nn), spec.cols), col_in_block)
        inside = _both(e, _k_used(e, spec, kk, block, end), _in_block(e, spec, in_block, nn))
        at = e.add(e.mul(block, block_size), within)
        value = _guarded(e, inside, f"memref.load %values[{at}] : memref<?x{el}>", el, e.zero)
        b_elements.append(tf32_round(e, value))
    btype = f"vector<{shape.b.registers}x{shape.b.per_register}x{el}>"
    b_frag = e(f"vector.from_elements {', '.join(b_elements)}", btype)
    # The MMA's A operand: B^T (mm x kk); each kk is a row of B, found once per step.
    krows: dict[int, tuple[str, str]] = {}
    placed = []
    for i in range(shape.a.count):
        mm, kk = _position(e, shape.a, i)
        col_off = shape.a.position(0, i)[1]
        if col_off not in krows:
            block, col_in_block = _where(e, spec, kk, ks)
            stored = _k_used(e, spec, kk, block, end)
            raw = _guarded(e, stored, f"memref.load %crd[{block}] : memref<?x{spec.crd}>",
                           spec.crd, e(f"arith.constant 0 : {spec.crd}"))  # fmt: skip
            krow = e.add(e.mul(_index(e, raw, spec.crd), spec.cols), col_in_block)
            krows[col_off] = (krow, _both(e, stored, e.below(krow, k)))
        placed.append((mm, *krows[col_off]))
    atype = f"vector<{shape.a.registers}x{shape.a.per_register}x{el}>"
    tf32 = ", tf32Enabled" if el == "f32" else ""
    current = []
    for j, col0 in enumerate(columns):
        a_elements = []
        for mm, krow, valid in placed:
            col = e.add(col0, mm)
            inside = _both(e, valid, e.below(col, n))
            value = _guarded(e, inside, f"memref.load %b[{krow}, {col}] : memref<?x?x{el}>",
                             el, e.zero)  # fmt: skip
            a_elements.append(tf32_round(e, value))
        a_frag = e(f"vector.from_elements {', '.join(a_elements)}", atype)
        current.append(e(f"nvgpu.mma.sync ({a_frag}, {b_frag}, {accs[j]}) {{mmaShape = [16, 8, "
                         f"{shape.k}]{tf32}}} : ({atype}, {btype}, {e.acc_vector}) -> "
                         f"{e.acc_vector}"))  # fmt: skip
    return current


def _k_used(e: Emitter, spec: PackedBsrMma, kk: str, block: str, end: str) -> str:
    """Whether virtual ``k`` index ``kk`` is a column of a stored block of the block row
    (``k`` past ``k // C`` whole blocks is not: it reads zero)."""
    stored = e.below(block, end)
    if spec.shape.k % spec.cols == 0 or spec.sub_steps > 1:
        return stored
    return _both(e, stored, e.below(kk, e.c(spec.per_step * spec.cols)))
