"""GPU kernels on tensor cores for block-sparse products, as MLIR text.

:func:`bsr_spmm` writes a private function that computes ``out = A B + cin``
for ``A`` in BSR (``R x C`` blocks, ``R`` a multiple of 16 and ``C`` of the
MMA's ``k``) with one ``gpu.launch`` whose warps issue ``nvgpu.mma.sync``:

- a warp owns one 16-row slice of a block row (an MMA tile ``m``) and
  ``tiles`` groups of 8 output columns; ``warps`` warps per thread block
  take consecutive slices (grid ``x``), column groups tile grid ``y``;
- it walks the block row's stored blocks; for each block and each ``k``
  slice of it, every lane loads its A fragment from the block's values
  and its B fragments from the dense operand's rows that the block's
  column selects, at the positions the PTX ISA defines
  (:mod:`sparsecomp.targets.fragments`), and the warp multiplies;
- the ``k`` of each slice is permuted, the same way for A and B (which
  leaves the product unchanged), so that the A elements a lane holds are
  adjacent in a block row: one vector load per lane and row, and a warp's
  load covers whole 32-byte sectors. C is read and written two adjacent
  columns per lane;
- loads past the matrix edge (partial blocks, the last column group) read
  zero and stores past it are skipped, so every shape is exact.

f32 operands run as tf32 (``m16n8k8``): each lane rounds its A and B
elements to tf32 (to nearest, ties away: what ``cvt.rna.tf32.f32`` does)
before the MMA, which accumulates in f32. f16 operands use ``m16n8k16``
and accumulate in f32, or in f16 where the product's result is f16 (the
MMA's f16 accumulator: ``cin`` and ``out`` are then f16).
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
class BsrMma:
    """One BSR x dense product kernel: block shape, element and index types, tiling."""

    rows: int  # R
    cols: int  # C
    element: str  # "f32" or "f16"
    pos: str  # positions' element type: i32, i64 ...
    crd: str
    warps: int = 4
    tiles: int = 4
    #: The accumulator's (and ``cin``'s, ``out``'s) element type: f32, or f16 for f16 inputs.
    acc: str = "f32"

    @property
    def shape(self) -> MmaShape:
        return for_inputs(self.element)

    def supported(self) -> str | None:
        """None, or why this block shape does not map onto the MMA."""
        if self.acc != "f32" and (self.acc, self.element) != ("f16", "f16"):
            return f"{self.element} products accumulate in f32 on the tensor cores, not {self.acc}"
        k = self.shape.k
        if self.rows % 16 or self.cols % k:
            return (f"{self.rows}x{self.cols} blocks are not multiples of the 16x{k} MMA tile, "
                    f"nor do they pack into one (at most {k} columns, or a multiple of "
                    f"{k})")  # fmt: skip
        return None

    @property
    def name(self) -> str:
        acc = "" if self.acc == "f32" else f"_acc{self.acc}"
        return (
            f"__sparse_iter_bsr_mma_{self.rows}x{self.cols}_{self.element}{acc}_"
            f"{self.pos}_{self.crd}_w{self.warps}t{self.tiles}"
        )


def k_slots(shape: MmaShape) -> dict[int, int]:
    """Where logical ``k`` offset ``o`` of thread 0's A (and B) elements is stored: ``o -> j``.

    Thread ``t`` of a group holds ``k = t * step + o``; it reads them from
    ``t * k/4 + j``, so its ``k/4`` elements are adjacent. A and B must see
    the same ``k`` per thread for one permutation to serve both.
    """
    a_offsets = sorted({shape.a.position(0, i)[1] for i in range(shape.a.count)})
    b_offsets = sorted({shape.b.position(0, i)[0] for i in range(shape.b.count)})
    assert a_offsets == b_offsets
    assert shape.a.thread[1] == shape.b.thread[0]
    assert len(a_offsets) == shape.k // 4
    return {o: j for j, o in enumerate(a_offsets)}


def bsr_spmm(spec: BsrMma) -> str:
    """The private function ``@spec.name(pos, crd, values, b, cin, out)``."""
    e = Emitter(spec.element, spec.acc)
    for v in (0, 1, 2, 3, 8, 16, 32):
        e.c(v)
    e.zero = e(f"arith.constant 0.0 : {spec.element}")
    m, n, k = sizes(e)
    mtiles = e.mul(e(f"arith.ceildivsi {m}, {e.c(spec.rows)}", "index"), spec.rows // 16)
    mtile = warp_launch(e, mtiles, n, spec.warps, spec.tiles)
    block_row = e(f"arith.divui {mtile}, {e.c(spec.rows // 16)}", "index")
    row_in_block = e.mul(e(f"arith.remui {mtile}, {e.c(spec.rows // 16)}", "index"), 16)
    first_row = e.add(e.mul(block_row, spec.rows), row_in_block)
    columns = [e.add(e.mul("%by", 8 * spec.tiles), 8 * j) for j in range(spec.tiles)]
    accs = [accumulator(e, first_row, col0, m, n) for col0 in columns]
    bounds = []
    for at_row in (block_row, e.add(block_row, 1)):
        raw = e(f"memref.load %pos[{at_row}]", f"memref<?x{spec.pos}>")
        bounds.append(e(f"arith.index_castui {raw} : {spec.pos} to index"))
    results = f"%v{e.count}"
    e.count += 1
    carried = ", ".join(f"%acc{j} = {a}" for j, a in enumerate(accs))
    e.begin(f"{results}:{spec.tiles} = scf.for %p = {bounds[0]} to {bounds[1]} step {e.c(1)} "
            f"iter_args({carried}) -> ({', '.join([e.acc_vector] * spec.tiles)}) {{")  # fmt: skip
    current = _block_product(e, spec, columns, row_in_block, k, n)
    e.raw(f"scf.yield {', '.join(current)} : {', '.join([e.acc_vector] * spec.tiles)}")
    e.end()
    for j, col0 in enumerate(columns):
        store(e, f"{results}#{j}", first_row, col0, m, n)
    e.end()
    e.raw("gpu.terminator")
    e.end()
    e.raw("return")
    head = (
        f"func.func private @{spec.name}(%pos: memref<?x{spec.pos}>, %crd: memref<?x{spec.crd}>, "
        f"%values: memref<?x{spec.element}>, %b: memref<?x?x{spec.element}>, "
        f"%cin: memref<?x?x{spec.acc}>, %out: memref<?x?x{spec.acc}>) {{"
    )
    return e.function(head)


def _block_product(
    e: Emitter, spec: BsrMma, columns: list[str], row_in_block: str, k: str, n: str
) -> list[str]:
    """The body of the loop over a block row's blocks: every k slice, every column group."""
    shape, el = spec.shape, spec.element
    slots, quarter = k_slots(shape), shape.k // 4
    block_col = e(f"arith.index_cast {e('memref.load %crd[%p]', f'memref<?x{spec.crd}>')} : "
                  f"{spec.crd} to index")  # fmt: skip
    values_first = e.mul("%p", spec.rows * spec.cols)
    thread_k = e.mul(e.thread, quarter)
    a_row = lane_offset(e, shape.a, 0)
    b_col = lane_offset(e, shape.b, 1)
    current = [f"%acc{j}" for j in range(spec.tiles)]
    atype = f"vector<{shape.a.registers}x{shape.a.per_register}x{el}>"
    btype = f"vector<{shape.b.registers}x{shape.b.per_register}x{el}>"
    for ks in range(spec.cols // shape.k):
        # A: per row of the fragment, this lane's k/4 adjacent (permuted) elements at once.
        rows: dict[int, str] = {}
        elements = []
        for i in range(shape.a.count):
            row_off, col_off = shape.a.position(0, i)
            if row_off not in rows:
                row = e.add(e.add(row_in_block, a_row), row_off)
                within = e.add(e.mul(row, spec.cols), e.add(thread_k, ks * shape.k))
                entry = e.add(values_first, within)
                rows[row_off] = e(f"vector.load %values[{entry}]",
                                  f"memref<?x{el}>, vector<{quarter}x{el}>")  # fmt: skip
            value = e(f"vector.extract {rows[row_off]}[{slots[col_off]}]",
                      f"{el} from vector<{quarter}x{el}>")  # fmt: skip
            elements.append(tf32_round(e, value))
        a = e(f"vector.from_elements {', '.join(elements)}", atype)
        for j, col0 in enumerate(columns):
            b_elements = []
            for i in range(shape.b.count):
                row_off, col_off = shape.b.position(0, i)
                krow = e.add(e.mul(block_col, spec.cols), e.add(thread_k, ks * shape.k
                                                               + slots[row_off]))  # fmt: skip
                ncol = e.add(e.add(col0, b_col), col_off)
                b_elements.append(tf32_round(e, guarded_load(e, krow, ncol, k, n)))
            b = e(f"vector.from_elements {', '.join(b_elements)}", btype)
            tf32 = ", tf32Enabled" if el == "f32" else ""
            current[j] = e(f"nvgpu.mma.sync ({a}, {b}, {current[j]}) {{mmaShape = [16, 8, "
                           f"{shape.k}]{tf32}}} : ({atype}, {btype}, {e.acc_vector}) -> "
                           f"{e.acc_vector}")  # fmt: skip
    return current
