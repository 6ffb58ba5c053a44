"""Reading and writing the dense operands of a loop nest (scalars, masked vectors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from mlir import ir
from mlir.dialects import affine, arith, tensor, vector

from sparsecomp.lowering.loops import index
from sparsecomp.lowering.plan import Access


@dataclass
class Vec:
    """The vectorized loop dimension: lanes per vector, unroll, current chunk."""

    dim: int
    lanes: int
    unroll: int
    size: ir.Value | None = None
    panel: tuple[ir.Value, ir.Value] | None = None  # [lo, hi) of the current column panel
    bases: list[ir.Value] = field(default_factory=list)
    masks: list[ir.Value] = field(default_factory=list)


class Planned(Protocol):
    """What operand access needs of a plan: the op and its output."""

    @property
    def op(self) -> ir.Operation: ...

    @property
    def output(self) -> Access: ...


def zero_of(element: ir.Type) -> ir.Value:
    if isinstance(element, ir.IntegerType | ir.IndexType):
        return arith.constant(element, 0)
    return arith.constant(element, 0.0)


class OperandAccess:
    """Mixin of :class:`~sparsecomp.lowering.nest.NestEmitter`: operand element access.

    ``idx`` maps loop dimensions to their current index; ``vec`` is the
    vectorized dimension's chunk (bases and masks per unrolled vector).
    """

    plan: Planned
    idx: dict[int, ir.Value]
    vec: Vec | None
    #: ``id(access) -> (tensor, column offset)``: an input read from a packed copy
    packed: Mapping[int, tuple[ir.Value, ir.Value]] = MappingProxyType({})

    def indices(self, acc: Access, u: int = 0) -> list[ir.Value]:
        out = []
        for expr in acc.map.results:
            if isinstance(expr, ir.AffineDimExpr):
                dim = expr.position
                vec = self.vec
                out.append(vec.bases[u] if vec is not None and dim == vec.dim else self.idx[dim])
            else:
                out.append(self._apply(expr))
        return out

    def _apply(self, expr: ir.AffineExpr) -> ir.Value:
        n = self.plan.op.attributes["indexing_maps"][0]
        n_dims = ir.AffineMapAttr(n).value.n_dims
        operands = [self.idx.get(d) or index(0) for d in range(n_dims)]
        amap = ir.AffineMap.get(n_dims, 0, [expr])
        return affine.apply(amap, operands)

    def scalar(self, acc: Access) -> ir.Value:
        if not isinstance(acc.value.type, ir.RankedTensorType):
            return acc.value  # a scalar operand
        return tensor.extract(acc.value, self.indices(acc))

    def along(self, acc: Access) -> ir.AffineMap:
        """The map of a vector transfer of ``acc`` along the vectorized dimension:
        its last index, or its first in a transposed matrix (``Y[j, i]`` read
        along ``j``: element by element, a row apart)."""
        assert self.vec is not None
        rank = len(acc.dims)
        at = rank - 1 if acc.dims[-1] == self.vec.dim else acc.dims.index(self.vec.dim)
        return ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(at)])

    def read(self, acc: Access, u: int, source: ir.Value | None = None) -> ir.Value:
        """Vector ``u`` of the chunk of ``acc`` (read from ``source``, default its value)."""
        assert self.vec is not None
        ty = ir.RankedTensorType(acc.value.type)
        vt = ir.VectorType.get([self.vec.lanes], ty.element_type)
        perm = self.along(acc)
        indices = self.indices(acc, u)
        packed = self.packed.get(id(acc)) if source is None else None
        if packed is not None:  # a panel's copy, vector dimension innermost, from the panel's start
            source, lo = packed
            if acc.dims[-1] == self.vec.dim:
                indices[-1] = arith.subi(indices[-1], lo)
            else:  # packed transposed: [k, j - lo]
                indices = [indices[1], arith.subi(indices[0], lo)]
            perm = ir.AffineMap.get_minor_identity(2, 1)
        return vector.transfer_read(
            vt, source or acc.value, indices, perm, zero_of(ty.element_type), [False],
            mask=self.vec.masks[u],
        )  # fmt: skip

    def write(self, value: ir.Value, out: ir.Value, u: int) -> ir.Value:
        assert self.vec is not None
        ty = ir.RankedTensorType(out.type)
        perm = self.along(self.plan.output)
        idx = self.indices(self.plan.output, u)
        return vector.transfer_write(ty, value, out, idx, perm, [False], mask=self.vec.masks[u])
