"""Helpers that write warp-level MMA kernels as MLIR text.

Used by :mod:`.mma_kernels` (BSR) and :mod:`.mma_sp_kernels` (2:4).

:class:`Emitter` numbers SSA values and caches index constants; the
functions read and write the accumulator fragment of an ``m16n8`` MMA
(``c0, c1`` at row ``group``, columns ``2 thread`` and ``2 thread + 1``;
``c2, c3`` eight rows below: the PTX ISA's layout, the same for every
``m16n8kK`` shape and for f32 and f16 accumulators), two adjacent columns
per lane with a mask at the matrix edge, and load dense operands with a
guard.
"""

from __future__ import annotations

from sparsecomp.targets.fragments import Fragment


class Emitter:
    """SSA-numbered MLIR lines, with cached index constants.

    ``element`` is the inputs' element type, ``acc`` the accumulator's
    (f32, or f16 where the product's result is f16).
    """

    def __init__(self, element: str, acc: str = "f32") -> None:
        self.el = element
        self.acc = acc
        #: The type of one MMA tile's accumulator fragment.
        self.acc_vector = f"vector<2x2x{acc}>"
        self.lines: list[str] = []
        #: Index constants, emitted at the top of the function (so every region sees them).
        self.prologue: list[str] = []
        self.count = 0
        self.indent = 4
        self.consts: dict[int, str] = {}
        #: SSA names of this lane's group id, thread id in group, and a zero element.
        self.group = self.thread = self.zero = ""

    def __call__(self, expr: str, ty: str | None = None) -> str:
        name = f"%v{self.count}"
        self.count += 1
        self.raw(f"{name} = {expr}" + (f" : {ty}" if ty else ""))
        return name

    def raw(self, line: str) -> None:
        self.lines.extend(" " * self.indent + part for part in line.split("\n"))

    def c(self, value: int) -> str:
        if value not in self.consts:
            name = f"%c{self.count}"
            self.count += 1
            self.prologue.append(f"    {name} = arith.constant {value} : index")
            self.consts[value] = name
        return self.consts[value]

    def function(self, head: str) -> str:
        """The function: ``head`` (its signature line), the constants, the body."""
        return "\n".join([head, *self.prologue, *self.lines, "}"])

    def add(self, a: str, b: str | int) -> str:
        return self(f"arith.addi {a}, {self.c(b) if isinstance(b, int) else b}", "index")

    def mul(self, a: str, b: int) -> str:
        return self(f"arith.muli {a}, {self.c(b)}", "index")

    def below(self, a: str, bound: str) -> str:
        return self(f"arith.cmpi ult, {a}, {bound}", "index")

    def begin(self, line: str) -> None:
        self.raw(line)
        self.indent += 2

    def end(self, line: str = "}") -> None:
        self.indent -= 2
        self.raw(line)


def lane_offset(e: Emitter, frag: Fragment, which: int) -> str:
    """``group * g + thread * t`` of the fragment's row (0) or column (1)."""
    total = e.c(0)
    for coeff, var in ((frag.group[which], e.group), (frag.thread[which], e.thread)):
        if coeff:
            total = e.add(total, e.mul(var, coeff))
    return total


def sizes(e: Emitter) -> tuple[str, str, str]:
    """The product's ``m``, ``n`` (``%out``'s dimensions) and ``k`` (``%b``'s rows)."""
    out = f"memref<?x?x{e.acc}>"
    m = e(f"memref.dim %out, {e.c(0)}", out)
    n = e(f"memref.dim %out, {e.c(1)}", out)
    return m, n, e(f"memref.dim %b, {e.c(0)}", f"memref<?x?x{e.el}>")


def pair_mask(e: Emitter, col: str, n: str) -> str:
    """``vector<2xi1>``: which of columns ``col``, ``col + 1`` are inside ``n``."""
    inside = [e.below(col, n), e.below(e.add(col, 1), n)]
    return e(f"vector.from_elements {inside[0]}, {inside[1]}", "vector<2xi1>")


def accumulator(e: Emitter, first_row: str, col0: str, m: str, n: str) -> str:
    """This lane's C fragment of the 16 x 8 tile at (first_row, col0), read from cin."""
    col = e.add(col0, e.mul(e.thread, 2))
    pair = f"vector<2x{e.acc}>"
    zero2 = e(f"arith.constant dense<0.0> : {pair}")
    halves = []
    for half in (0, 8):
        row = e.add(e.add(first_row, e.group), half)
        mask = pair_mask(e, col, n)
        name = e(f"scf.if {e.below(row, m)} -> ({pair}) {{")
        e.indent += 2
        loaded = e(f"vector.maskedload %cin[{row}, {col}], {mask}, {zero2} : "
                   f"memref<?x?x{e.acc}>, vector<2xi1>, {pair} into {pair}")  # fmt: skip
        e.raw(f"scf.yield {loaded} : {pair}")
        e.end(f"}} else {{\n  scf.yield {zero2} : {pair}\n}}")
        halves.append(name)
    parts = [e(f"vector.extract {h}[{i}]", f"{e.acc} from {pair}") for h in halves
             for i in (0, 1)]  # fmt: skip
    return e(f"vector.from_elements {', '.join(parts)}", e.acc_vector)


def store(e: Emitter, acc: str, first_row: str, col0: str, m: str, n: str) -> None:
    col = e.add(col0, e.mul(e.thread, 2))
    for register, half in ((0, 0), (1, 8)):
        row = e.add(e.add(first_row, e.group), half)
        pair = e(f"vector.extract {acc}[{register}]", f"vector<2x{e.acc}> from {e.acc_vector}")
        mask = pair_mask(e, col, n)
        e.begin(f"scf.if {e.below(row, m)} {{")
        e.raw(f"vector.maskedstore %out[{row}, {col}], {mask}, {pair} : memref<?x?x{e.acc}>, "
              f"vector<2xi1>, vector<2x{e.acc}>")  # fmt: skip
        e.end()


def guarded_load(e: Emitter, row: str, col: str, rows: str, cols: str) -> str:
    """``b[row, col]``, or zero outside ``rows x cols``."""
    inside = e(f"arith.andi {e.below(row, rows)}, {e.below(col, cols)}", "i1")
    name = e(f"scf.if {inside} -> ({e.el}) {{")
    e.indent += 2
    loaded = e(f"memref.load %b[{row}, {col}]", f"memref<?x?x{e.el}>")
    e.raw(f"scf.yield {loaded} : {e.el}")
    e.end(f"}} else {{\n  scf.yield {e.zero} : {e.el}\n}}")
    return name


def tf32_round(e: Emitter, value: str) -> str:
    """``value`` rounded to tf32 (nearest, ties away) for f32; f16 values as they are."""
    if e.el != "f32":
        return value
    bits = e(f"arith.bitcast {value} : f32 to i32")
    half = e("arith.constant 4096 : i32")
    mask = e("arith.constant -8192 : i32")
    rounded = e(f"arith.andi {e(f'arith.addi {bits}, {half}', 'i32')}, {mask}", "i32")
    return e(f"arith.bitcast {rounded} : i32 to f32")


def warp_launch(e: Emitter, mtiles: str, n: str, warps: int, tiles: int) -> str:
    """Open the ``gpu.launch`` of an MMA kernel and the guard of its warp's 16-row tile.

    ``warps`` warps per block take consecutive tiles (``%bx``), groups of
    ``8 * tiles`` output columns tile ``%by`` (:func:`open_launch`). Sets ``e.group`` and
    ``e.thread``; returns the warp's tile index. Two ``e.end()`` close it.
    """
    gx = e(f"arith.ceildivsi {mtiles}, {e.c(warps)}", "index")
    gy = e(f"arith.ceildivsi {n}, {e.c(8 * tiles)}", "index")
    warp = open_launch(e, gx, gy, 32 * warps)
    mtile = e.add(e.mul("%bx", warps), warp)
    e.begin(f"scf.if {e.below(mtile, mtiles)} {{")
    return mtile


def open_launch(e: Emitter, gx: str, gy: str, threads: int, workgroup: str = "") -> str:
    """Open a ``gpu.launch`` of ``gx x gy`` blocks of ``threads`` threads (``%bx``,
    ``%by``, ``%tx``; the blocks in one grid dimension, ``%bx`` and ``%by``
    derived), with ``workgroup`` attributions if given; set ``e.group`` and
    ``e.thread`` (the lane's place in the MMA fragments); return the thread's warp."""
    buffers = f" workgroup({workgroup})" if workgroup else ""
    blocks = e(f"arith.muli {gx}, {gy}", "index")
    e.begin(
        f"gpu.launch blocks(%lx, %ly, %lz) in (%gx = {blocks}, %gy = {e.c(1)}, %gz = {e.c(1)}) "
        f"threads(%tx, %ty, %tz) in (%sx = {e.c(threads)}, %sy = {e.c(1)}, "
        f"%sz = {e.c(1)}){buffers} {{"
    )
    # One grid dimension, x: CUDA's y holds 65535 blocks, a column group's count past
    # 2.1M columns (x holds 2^31 - 1); x-fastest order, as a 2-D grid runs its blocks.
    e.raw(f"%bx = arith.remui %lx, {gx} : index")
    e.raw(f"%by = arith.divui %lx, {gx} : index")
    lane = e(f"arith.remui %tx, {e.c(32)}", "index")
    e.group = e(f"arith.shrui {lane}, {e.c(2)}", "index")
    e.thread = e(f"arith.andi {lane}, {e.c(3)}", "index")
    return e(f"arith.divui %tx, {e.c(32)}", "index")
