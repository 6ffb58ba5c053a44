"""The stage II view of one sparse operand: its buffers and level sizes.

A :class:`Reader` emits ``sparse_iter.positions``/``coordinates``/``values``
and ``tensor.dim`` once, at the insertion point, and serves them to the
level loops of :mod:`.levels` (it implements :class:`.levels.Storage` for
layouts without ``mod`` levels; the driver of a nest adds the edge bound of
block levels itself).
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.dialects import sparse_iter
from sparsecomp.formats.layout import Layout
from sparsecomp.lowering.loops import index

si: Any = sparse_iter  # generated at run time from the .td; untyped


def int_type(width: int) -> ir.Type:
    """The integer type of a buffer of bit width ``width`` (0: 64 bits)."""
    return ir.IntegerType.get_signless(width or 64)


def rank1(element: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size()], element)


class Reader:
    """Buffers and dimension sizes of the encoded tensor ``value``."""

    def __init__(self, value: ir.Value, layout: Layout) -> None:
        self.value = value
        self.layout = layout
        self.element = ir.RankedTensorType(value.type).element_type
        self.pos = {
            lv: si.positions(rank1(int_type(layout.pos_width)), value, lv)
            for lv, level in enumerate(layout.levels) if level.has_positions
        }  # fmt: skip
        self.crd = {
            lv: si.coordinates(rank1(int_type(layout.crd_width)), value, lv)
            for lv, level in enumerate(layout.levels) if level.has_coordinates
        }  # fmt: skip
        self.values = si.values(rank1(self.element), value)
        self.dim_sizes = [tensor.dim(value, index(k)) for k in range(layout.rank)]

    def level_size(self, lv: int) -> ir.Value:
        """How many coordinates level ``lv`` has (a block level: blocks or block size)."""
        expr = self.layout.dim_to_lvl.results[lv]
        size = self.dim_sizes[expr.dim]
        if expr.op == "floordiv":
            return arith.ceildivsi(size, index(expr.const))
        return index(expr.const) if expr.op == "mod" else size

    def level_bound(self, lv: int, size: ir.Value) -> ir.Value:
        return size
