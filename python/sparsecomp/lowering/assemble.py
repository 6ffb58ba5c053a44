"""Positions from row counts, and a CSR tensor from its buffers (stage II IR)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.lowering.loops import State, add, for_state, index


def cast(value: ir.Value, ty: ir.Type) -> ir.Value:
    """``value`` (index or integer) as ``ty``, cast only if needed."""
    return value if value.type == ty else arith.index_cast(ty, value)


def prefix_positions(counts: ir.Value, rows: ir.Value, pos_t: ir.Type) -> tuple[ir.Value, ir.Value]:
    """``(positions, total)``: ``positions[0] = 0``, ``positions[r + 1] = sum(counts[:r + 1])``.

    ``counts`` is a rank-1 ``index`` tensor of ``rows`` entries; the
    positions are a new rank-1 tensor of ``pos_t``; ``total`` is an index.
    """
    empty = tensor.empty([add(rows, index(1))], pos_t)
    start = tensor.insert(cast(index(0), pos_t), empty, [index(0)])

    def step(r: ir.Value, s: State) -> State:
        total = add(s["total"], tensor.extract(counts, [r]))
        pos = tensor.insert(cast(total, pos_t), s["pos"], [add(r, index(1))])
        return {"pos": pos, "total": total}

    done = for_state(index(0), rows, {"pos": start, "total": index(0)}, step)
    return done["pos"], done["total"]


def assemble_csr(
    ty: ir.Type, pos: ir.Value, crd: ir.Value, vals: ir.Value, rows: ir.Value, cols: ir.Value
) -> ir.Value:
    """``sparse_iter.assemble`` of a CSR tensor of type ``ty``."""
    op = ir.Operation.create(
        "sparse_iter.assemble",
        results=[ty],
        operands=[pos, crd, vals, rows, cols],
        attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 1, 2])},
    )
    return op.results[0]
