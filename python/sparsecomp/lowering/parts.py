"""Split a ``linalg.generic`` over a composable operand into one op per part.

A composable tensor's parts hold disjoint sets of its nonzeros that sum to
it (``formats/composable.py``), so an op that *accumulates* into its output
where the operand is zero (``out + f(a, ...)``: SpMV, SpMM, row sums) is the
chain of the same op over each part, each part's result the next one's
``outs``. Each part is read with ``sparse_iter.get_part`` and its op is then
lowered like any other (an ELL bucket, a BSR part, a CSR rest ...), which is
SparseTIR's lowering of composable formats. The parts' ops carry the hints
of :mod:`sparsecomp.lowering.hints` for the GPU schedule (their group, whether
their rows are disjoint, the rest's least row length). Ops that overwrite their output
(``a * x`` into a fresh output) would lose the earlier parts and are refused.
"""

from __future__ import annotations

import itertools
from typing import Any

from mlir import ir

from sparsecomp.dialects import sparse_iter
from sparsecomp.formats.composable import Composable
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.linalg_ops import input_count
from sparsecomp.lowering.hints import DISJOINT_ROWS, MIN_ROW_ENTRIES, PARTS_GROUP
from sparsecomp.lowering.plan import Unsupported
from sparsecomp.lowering.zeros import Zero, classify

si: Any = sparse_iter  # generated at run time from the .td; untyped
_groups = itertools.count()  # parts_group ids: distinct within a process


def composable_input(op: ir.Operation) -> int | None:
    """The number of the op's composable input, if it has one."""
    n_in = input_count(op)
    found = [i for i in range(n_in) if isinstance(layout_of(op.operands[i].type), Composable)]
    if len(found) > 1:
        raise Unsupported("ops over two composable operands are not supported")
    if any(isinstance(layout_of(r.type), Composable) for r in op.results):
        raise Unsupported("composable outputs are not supported; compute a CSR output instead")
    return found[0] if found else None


def check_split(op: ir.Operation, number: int) -> None:
    """Raise :class:`Unsupported` unless ``op`` accumulates where input ``number`` is zero."""
    n_in = input_count(op)
    block = op.regions[0].blocks[0]
    if (
        len(op.results) != 1
        or classify(block, [number], n_in) != Zero.OUT
        or not _out_only_added(block, n_in)
    ):
        raise Unsupported(
            "a composable operand is lowered part by part, which needs the body to "
            "accumulate into the output (out + f(a, ...), f not reading out); convert it to one "
            "layout first"
        )


def _out_only_added(block: ir.Block, out_arg: int) -> bool:
    """Whether the body's output value is read only by the add that yields: ``out +
    f(a, ...)`` with ``f`` not reading it. ``out + out * out * a`` is ``out`` where
    ``a`` is zero, but its parts taken in turn sum a row's entries in another order
    than the row's (a CSR and a hyb operand gave 2.17 and 2.05)."""
    out = block.arguments[out_arg]
    ops = [o.operation for o in block.operations]
    if not ops or ops[-1].name != "linalg.yield" or not len(ops[-1].operands):
        return False
    yielded = ops[-1].operands[0]
    if isinstance(yielded, ir.BlockArgument):
        return yielded == out  # out itself: nothing added
    add = yielded.owner
    if add.name not in ("arith.addf", "arith.addi", "complex.add") or out not in list(
        add.operands
    ):
        return False
    return all(use.owner == add for use in out.uses)


def split_parts(op: ir.Operation, number: int) -> list[ir.Operation]:
    """Replace ``op`` by one clone per part of input ``number``; returns the clones."""
    check_split(op, number)
    n_in = input_count(op)
    value = op.operands[number]
    ty = ir.RankedTensorType(value.type)
    layout = layout_of(ty)
    assert isinstance(layout, Composable)
    clones = []
    out = op.operands[n_in]
    group = next(_groups)
    with ir.InsertionPoint(op), op.location:
        for k, part in enumerate(layout.parts):
            enc = ir.Attribute.parse(part.layout.attr_text())
            part_ty = ir.RankedTensorType.get(ty.shape, ty.element_type, enc)
            piece = si.get_part(part_ty, value, k)
            clone = op.clone()
            i64 = ir.IntegerType.get_signless(64)
            clone.attributes[PARTS_GROUP] = ir.IntegerAttr.get(i64, group)
            if layout.disjoint_rows() and part.layout.levels[0].kind != "dense":
                # A part with dense rows (hyb's rest) reads and writes every output
                # row, its empty ones too: run beside the others it would write back
                # rows they wrote, so it adds atomically instead.
                clone.attributes[DISJOINT_ROWS] = ir.UnitAttr.get()
            if part.rule == "rest" and (least := layout.rest_min_row_entries()) is not None:
                clone.attributes[MIN_ROW_ENTRIES] = ir.IntegerAttr.get(i64, least)
            clone.operands[number] = piece
            clone.operands[n_in] = out
            out = clone.results[0]
            clones.append(clone)
    op.results[0].replace_all_uses_with(out)
    op.erase()
    return clones
