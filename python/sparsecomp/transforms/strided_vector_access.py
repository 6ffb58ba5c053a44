"""Pass ``sparse-iter-strided-vector-access``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, vector
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass


def _strided(ty: ir.Type) -> bool:
    """Whether a memref's innermost stride is not known to be 1."""
    if not isinstance(ty, ir.MemRefType) or ir.MemRefType(ty).rank == 0:
        return False
    strides, _ = ir.MemRefType(ty).get_strides_and_offset()
    return strides[-1] != 1


def _zero(ty: ir.Type) -> ir.Value:
    if isinstance(ty, ir.FloatType):
        return arith.ConstantOp(ty, ir.FloatAttr.get(ty, 0.0)).result
    return arith.ConstantOp(ty, ir.IntegerAttr.get(ty, 0)).result


def _transfer_attrs(base: ir.Value) -> tuple[ir.AffineMapAttr, ir.ArrayAttr]:
    """A minor identity map onto the innermost dimension; not known in bounds."""
    rank = ir.MemRefType(base.type).rank
    amap = ir.AffineMapAttr.get(ir.AffineMap.get_minor_identity(rank, 1))
    return amap, ir.ArrayAttr.get([ir.BoolAttr.get(False)])


def maskedload_to_transfer(op: ir.Operation) -> None:
    """``maskedload %base[%i...], %mask, %pass`` -> ``select %mask, transfer_read, %pass``."""
    base, indices = op.operands[0], list(op.operands[1:-2])
    mask, passthru = op.operands[-2], op.operands[-1]
    vty = ir.VectorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        amap, in_bounds = _transfer_attrs(base)
        pad = _zero(vty.element_type)
        read = vector.TransferReadOp(vty, base, indices, amap, pad, in_bounds, mask=mask)
        value = arith.SelectOp(mask, read.result, passthru).result
    op.results[0].replace_all_uses_with(value)
    op.erase()


def maskedstore_to_transfer(op: ir.Operation) -> None:
    """``maskedstore %base[%i...], %mask, %value`` -> ``transfer_write`` with the mask."""
    base, indices = op.operands[0], list(op.operands[1:-2])
    mask, value = op.operands[-2], op.operands[-1]
    with ir.InsertionPoint(op), op.location:
        amap, in_bounds = _transfer_attrs(base)
        vector.TransferWriteOp(None, value, base, indices, amap, in_bounds, mask=mask)
    op.erase()


_REWRITES = {
    "vector.maskedload": maskedload_to_transfer,
    "vector.maskedstore": maskedstore_to_transfer,
}


@dataclasses.dataclass(frozen=True)
class StridedVectorAccessPass(SparsecompPass):
    """Turn 1-D vector loads and stores of non-unit-stride memrefs into transfers.

    ``vector.maskedload`` and ``vector.maskedstore`` access contiguous
    elements, but unlike ``vector.load``/``store`` their verifier accepts a
    memref of any stride, and ``convert-vector-to-llvm`` lowers them to one
    contiguous masked LLVM load or store from the first element, ignoring
    the stride. The upstream sparsifier's vectorizer (``vl`` > 0)
    emits such loads on the array-of-structs coordinate buffer of a COO
    tensor (a ``memref<?xindex, strided<[?], offset: ?>>`` view with
    stride = the COO rank), so every vectorized loop over such a tensor
    read wrong coordinates. Each such op on a memref whose innermost stride
    is not statically 1 becomes the equivalent ``vector.transfer_read`` /
    ``transfer_write`` (minor identity map, the same mask, padding zero and
    an ``arith.select`` of the masked load's pass-through), which
    ``convert-vector-to-scf`` lowers element by element with the stride.
    Accesses of unit-stride memrefs and vectors of rank > 1 are left alone.
    (``vector.gather`` of such memrefs fails to lower: an error, not a
    wrong result.)

    Runs on buffers, after ``sparsification-and-bufferization`` and before
    ``convert-vector-to-scf``.

    Before:

    ```mlir
    %v = vector.maskedload %crd[%i], %mask, %pass : memref<?xindex, strided<[?], offset: ?>>,
        vector<8xi1>, vector<8xindex> into vector<8xindex>
    ```

    After:

    ```mlir
    %c0 = arith.constant 0 : index
    %r = vector.transfer_read %crd[%i], %c0, %mask {in_bounds = [false]}
        : memref<?xindex, strided<[?], offset: ?>>, vector<8xindex>
    %v = arith.select %mask, %r, %pass : vector<8xi1>, vector<8xindex>
    ```
    """

    NAME = "sparse-iter-strided-vector-access"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for o in preorder(op):
            rewrite = _REWRITES.get(o.name)
            if rewrite is None or not _strided(o.operands[0].type):
                continue
            value = o.results[0] if o.results else o.operands[-1]
            if ir.VectorType(value.type).rank == 1:
                rewrite(o)
