"""``nvgpu.mma.sync`` for a warp, as host code over every lane's fragment registers.

Called by :class:`._lockstep.Lockstep` at a phase boundary, with each
operand kept per thread. For each warp of the group: every lane's A, B and
C registers are scattered into ``m x k``, ``k x n`` and ``m x n`` tiles at
the positions the PTX ISA defines (:mod:`sparsecomp.targets.fragments`),
the tiles are multiplied (``C += A B`` in f32), and every lane's D
registers are gathered back from the tile (rounded to f16 once per MMA
where the accumulator is f16). tf32 inputs are truncated to
tf32 (the low 13 bits ignored, as the tensor cores do), f16 ones widened.
``nvgpu.mma.sp.sync`` (2:4 A, ``m16n8k16`` f16) first places each lane's
kept A values in a zeroed dense tile by the 2-bit indices of the metadata
register the hardware reads. A kernel that loads a fragment element into
the wrong register or lane, or metadata that points at the wrong column,
computes a wrong product here, as it would on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from sparsecomp.targets.fragments import SHAPES, Fragment, MmaShape
from sparsecomp.transforms._lockstep import Lockstep, Refusal, index


def emulate_mma(state: Lockstep, op: ir.Operation) -> None:
    """Emulate the ``nvgpu.mma.sync`` ``op`` for every warp of ``state``'s group, here."""
    if op.name == "nvgpu.mma.sp.sync":
        emulate_mma_sp(state, op)
        return
    m, n, k = (int(d) for d in ir.ArrayAttr(op.attributes["mmaShape"]))
    element = ir.VectorType(op.operands[0].type).element_type
    kind = "tf32" if "tf32Enabled" in op.attributes else str(element)
    shape = SHAPES.get((m, n, k, kind))
    if shape is None:
        raise Refusal(op, f"mma.sync m{m}n{n}k{k} with {kind} inputs is not emulated")
    a, b, c = (state.lane_array(v) for v in op.operands)

    def scatter_a(tile: ir.Value, first: ir.Value) -> None:
        _scatter(a, shape.a, tile, first, kind)

    _per_warp(state, op, shape, scatter_a, (b, kind), c)


def _per_warp(state: Lockstep, op: ir.Operation, shape: MmaShape,
              scatter_a: Callable[[ir.Value, ir.Value], None], b: tuple[ir.Value, str],
              c: ir.Value) -> None:  # fmt: skip
    """For every warp of the group: A into its tile (``scatter_a(tile, first_lane)``), B
    (array, input kind) and C by their fragments, ``C += A B``, D gathered into a new array."""
    m, n, k = shape.m, shape.n, shape.k
    d = state.new_array(op.results[0].type)
    f32 = ir.F32Type.get()
    with state.arrays_at:
        tiles = [memref.alloca(ir.MemRefType.get(list(s), f32), [], [])
                 for s in ((m, k), (k, n), (m, n))]  # fmt: skip
    warps = scf.ForOp(index(0), arith.divui(state.lanes, index(32)), index(1))
    with ir.InsertionPoint(warps.body):
        first = arith.muli(warps.induction_variable, index(32))
        scatter_a(tiles[0], first)
        _scatter(b[0], shape.b, tiles[1], first, b[1])
        _scatter(c, shape.c, tiles[2], first, str(ir.VectorType(op.operands[2].type).element_type))
        _multiply(tiles[0], tiles[1], tiles[2], m, n, k)
        _gather(d, shape.c, tiles[2], first, ir.VectorType(op.results[0].type))
        scf.YieldOp([])
    state.arrays[op.results[0]] = d


def _position(fragment: Fragment, lane: ir.Value, i: int) -> tuple[ir.Value, ir.Value]:
    """``(row, col)`` of element ``i`` of ``lane``'s fragment, as the PTX ISA tables say."""
    group = arith.shrui(lane, index(2))
    thread = arith.andi(lane, index(3))
    row_off, col_off = fragment.position(0, i)
    row = arith.addi(
        arith.addi(
            arith.muli(group, index(fragment.group[0])),
            arith.muli(thread, index(fragment.thread[0])),
        ),
        index(row_off),
    )
    col = arith.addi(
        arith.addi(
            arith.muli(group, index(fragment.group[1])),
            arith.muli(thread, index(fragment.thread[1])),
        ),
        index(col_off),
    )
    return row, col  # fmt: skip


def _to_f32(value: ir.Value, kind: str) -> ir.Value:
    f32 = ir.F32Type.get()
    if kind == "tf32":
        i32 = ir.IntegerType.get_signless(32)
        bits = arith.bitcast(i32, value)
        return arith.bitcast(f32, arith.andi(bits, arith.constant(i32, -8192)))
    return arith.extf(f32, value) if value.type != f32 else value


def _scatter(array: ir.Value, fragment: Fragment, tile: ir.Value, first: ir.Value,
             kind: str) -> None:  # fmt: skip
    lanes = scf.ForOp(index(0), index(32), index(1))
    with ir.InsertionPoint(lanes.body):
        lane = lanes.induction_variable
        registers = memref.load(array, [arith.addi(first, lane)])
        for i in range(fragment.count):
            value = vector.extract(registers, [], [i])
            memref.store(_to_f32(value, kind), tile, list(_position(fragment, lane, i)))
        scf.YieldOp([])


def _multiply(a: ir.Value, b: ir.Value, c: ir.Value, m: int, n: int, k: int) -> None:
    """``c += a @ b`` on the tiles, in f32."""
    rows = scf.ForOp(index(0), index(m), index(1))
    with ir.InsertionPoint(rows.body):
        cols = scf.ForOp(index(0), index(n), index(1))
        with ir.InsertionPoint(cols.body):
            at = [rows.induction_variable, cols.induction_variable]
            inner = scf.ForOp(index(0), index(k), index(1), [memref.load(c, at)])
            with ir.InsertionPoint(inner.body):
                kk = inner.induction_variable
                product = arith.mulf(memref.load(a, [at[0], kk]), memref.load(b, [kk, at[1]]))
                scf.YieldOp([arith.addf(inner.inner_iter_args[0], product)])
            memref.store(inner.results[0], c, at)
            scf.YieldOp([])
        scf.YieldOp([])


def _gather(array: ir.Value, fragment: Fragment, tile: ir.Value, first: ir.Value,
            ty: ir.VectorType) -> None:  # fmt: skip
    lanes = scf.ForOp(index(0), index(32), index(1))
    with ir.InsertionPoint(lanes.body):
        lane = lanes.induction_variable
        values = [memref.load(tile, list(_position(fragment, lane, i)))
                  for i in range(fragment.count)]  # fmt: skip
        if ty.element_type != ir.F32Type.get():
            values = [arith.truncf(ty.element_type, v) for v in values]
        flat = ir.VectorType.get([fragment.count], ty.element_type)
        memref.store(vector.from_elements(flat, values), array, [arith.addi(first, lane)])
        scf.YieldOp([])


def emulate_mma_sp(state: Lockstep, op: ir.Operation) -> None:
    """Emulate ``nvgpu.mma.sp.sync`` (2:4 A, ``m16n8k16`` f16) for every warp, here.

    Each lane's A registers hold the two kept values of its group of 4 in rows
    ``group`` and ``group + 8``; where each goes in the dense row is the 2-bit
    index the hardware reads from the metadata register of lane
    ``4 * group + selector``, bits ``16 * (row >= 8) + 4 * (chunk % 4) + 2 * slot``
    (the PTX ISA's sparse matrix storage; :func:`sparsecomp.formats.mma_sp.mma_sp_reference`
    is the numpy version of the same reading).
    """
    m, n, k = (int(d) for d in ir.ArrayAttr(op.attributes["mmaShape"]))
    element = str(ir.VectorType(op.operands[0].type).element_type)
    if (m, n, k, element) != (16, 8, 16, "f16"):
        raise Refusal(op, f"mma.sp.sync m{m}n{n}k{k} with {element} inputs is not emulated")
    selector = 0
    if "sparsitySelector" in op.attributes:
        selector = ir.IntegerAttr(op.attributes["sparsitySelector"]).value
    a, b, c, meta = (state.lane_array(v) for v in op.operands)

    def scatter_a(tile: ir.Value, first: ir.Value) -> None:
        _zero(tile, m, k)
        _scatter_sparse(a, meta, tile, first, selector)

    _per_warp(state, op, SHAPES[(16, 8, 16, "f16")], scatter_a, (b, "f16"), c)


def _zero(tile: ir.Value, rows: int, cols: int) -> None:
    zero = arith.constant(ir.F32Type.get(), 0.0)
    outer = scf.ForOp(index(0), index(rows), index(1))
    with ir.InsertionPoint(outer.body):
        inner = scf.ForOp(index(0), index(cols), index(1))
        with ir.InsertionPoint(inner.body):
            memref.store(zero, tile, [outer.induction_variable, inner.induction_variable])
            scf.YieldOp([])
        scf.YieldOp([])


def _scatter_sparse(array: ir.Value, meta: ir.Value, tile: ir.Value, first: ir.Value,
                    selector: int) -> None:  # fmt: skip
    """Every lane's kept A values into the dense ``16 x 16`` tile, where the metadata says."""
    i32 = ir.IntegerType.get_signless(32)
    lanes = scf.ForOp(index(0), index(32), index(1))
    with ir.InsertionPoint(lanes.body):
        lane = lanes.induction_variable
        group, thread = arith.shrui(lane, index(2)), arith.andi(lane, index(3))
        registers = memref.load(array, [arith.addi(first, lane)])
        holder = arith.addi(first, arith.addi(arith.muli(group, index(4)), index(selector)))
        packed = vector.bitcast(ir.VectorType.get([1], i32), memref.load(meta, [holder]))
        word = vector.extract(packed, [], [0])
        thread_bits = arith.muli(arith.index_cast(i32, thread), arith.constant(i32, 4))
        for register in range(2):
            for slot in range(2):
                value = arith.extf(
                    ir.F32Type.get(), vector.extract(registers, [], [2 * register + slot])
                )
                shift = arith.addi(thread_bits, arith.constant(i32, 16 * register + 2 * slot))
                chosen = arith.andi(arith.shrui(word, shift), arith.constant(i32, 3))
                col = arith.addi(
                    arith.muli(thread, index(4)), arith.index_cast(ir.IndexType.get(), chosen)
                )
                row = arith.addi(group, index(8 * register))
                memref.store(value, tile, [row, col])
        scf.YieldOp([])
