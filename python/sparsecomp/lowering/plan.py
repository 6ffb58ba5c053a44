"""The plan for lowering one ``linalg.generic`` whose operands are sparse.

One sparse input *drives* the iteration: the loop nest walks its storage
levels in order, so every loop visits stored entries only (positions, not
coordinates). Loop dimensions the driver does not index are *free* dense
loops. The order of the steps:

1. the driver's leading levels whose dimension is parallel and indexes the
   output (the row loop of CSR; the outermost is run in parallel),
2. free parallel dimensions (the columns of a dense SpMM output; the
   innermost of them may be vectorized),
3. the driver's remaining levels (reductions such as the column level of SpMV),
4. free reduction dimensions (the ``k`` of SDDMM; may be vectorized).

The output element is read once, *hoisted* to the first point where all of
its indices are known, carried through the loops inside that point, and
written back after them: SpMV accumulates a row in a register, SpMM a row
chunk in vector registers.

Other sparse inputs are allowed when they share the driver's index structure
(same layout and map, and the layout's ``index_group`` option names a group):
they are read at the driver's position. A sparse output must have the
driver's type and map: its values are computed per driver position and the
result is ``sparse_iter.with_values`` of the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.linalg_ops import input_count
from sparsecomp.lowering.zeros import Zero


class Unsupported(SparsecompError):
    """The op is outside what the sparse_iter lowering handles (message says why)."""


@dataclass(frozen=True)
class Access:
    """One operand of the op: value, map results as loop dims (None: not a plain dim)."""

    number: int
    value: ir.Value
    map: ir.AffineMap
    dims: tuple[int | None, ...]
    layout: Layout | None

    def uses(self, dim: int) -> bool:
        return any(dim in _dims_of(e) for e in self.map.results)


@dataclass(frozen=True)
class Step:
    """One loop of the nest: a driver level, or a free dense loop over ``dim``."""

    kind: Literal["level", "dense"]
    level: int = -1
    dim: int = -1


@dataclass(frozen=True)
class Plan:
    op: ir.Operation
    iterators: tuple[str, ...]
    inputs: tuple[Access, ...]
    output: Access
    driver: int
    shared: tuple[int, ...]
    zero: Zero
    steps: tuple[Step, ...]
    hoist: int
    parallel: bool
    vector_dim: int  # -1: scalar code
    vector_reduction: bool  # the vector dim is a reduction (body = out + g)

    @property
    def driver_access(self) -> Access:
        return self.inputs[self.driver]

    @property
    def layout(self) -> Layout:
        assert self.driver_access.layout is not None
        return self.driver_access.layout

    def level_dim(self, level: int) -> int:
        """The loop dimension a driver level iterates (through its map)."""
        expr = self.layout.dim_to_lvl.results[level]
        dim = self.driver_access.dims[expr.dim]
        assert dim is not None
        return dim

    @property
    def sparse_output(self) -> bool:
        return self.output.layout is not None


def _dims_of(expr: ir.AffineExpr) -> set[int]:
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims_of(expr.lhs) | _dims_of(expr.rhs)
    return set()


def _layout(value: ir.Value) -> Layout | None:
    layout = layout_of(value.type)
    if layout is None:
        return None
    if not isinstance(layout, Layout):
        raise Unsupported("a composable operand must be split into its parts before planning")
    return layout


def _access(number: int, value: ir.Value, attr: ir.Attribute) -> Access:
    amap = ir.AffineMapAttr(attr).value
    dims = tuple(e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results)
    return Access(number, value, amap, dims, _layout(value))


def accesses(op: ir.Operation) -> tuple[list[Access], list[Access]]:
    maps = list(op.attributes["indexing_maps"])
    n_in = input_count(op)
    values = list(op.operands)
    ins = [_access(i, values[i], maps[i]) for i in range(n_in)]
    outs = [_access(i, values[i], maps[i]) for i in range(n_in, len(values))]
    return ins, outs
