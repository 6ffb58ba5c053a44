"""Pass ``sparse-iter-check-whole-blocks``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, tensor
from mlir.passmanager import ExternalPass

from sparsecomp.ir import fatal, whole_blocks
from sparsecomp.ir.calls import functions, name_of
from sparsecomp.ir.fatal import where
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass


def message(place: str, func: str, ty: ir.Type) -> str:
    """The run-time error for a shape (``{}`` per dimension) that ``ty``'s blocks do not divide."""
    blocks = "x".join(map(str, whole_blocks.block_sizes(ty)))
    shape = "x".join("{}" for _ in range(ir.RankedTensorType(ty).rank))
    return (
        f"{place}error: '{func}' holds {ty} in whole {blocks} blocks, as the upstream "
        f"sparsifier stores BSR (its storage is read), but its shape at run time, {shape}, "
        "does not divide into them"
    )


def _source_sizes(op: ir.Operation, ty: ir.RankedTensorType) -> list[ir.Value] | None:
    """The dimension sizes ``op`` builds its ``ty`` result with, as index values; None
    for ops whose result's shape comes from a tensor of the same kind (already checked)."""
    index = ir.IndexType.get()
    if op.name == "sparse_tensor.convert":
        src = ir.RankedTensorType(op.operands[0].type)
        return [
            tensor.DimOp(op.operands[0], arith.ConstantOp(index, d).result).result
            if src.is_dynamic_dim(d)
            else arith.ConstantOp(index, src.shape[d]).result
            for d in range(src.rank)
        ]
    if op.name == "bufferization.alloc_tensor":
        segments = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
        if segments[1]:  # a copy: the copied tensor's shape, of the same type
            return None
        dynamic = list(op.operands)[: segments[0]]
    elif op.name == "tensor.empty":
        dynamic = list(op.operands)
    else:
        return None
    sizes, it = [], iter(dynamic)
    for d in range(ty.rank):
        static = not ty.is_dynamic_dim(d)
        sizes.append(arith.ConstantOp(index, ty.shape[d]).result if static else next(it))
    return sizes


def check_op(op: ir.Operation, func: ir.Operation, module: ir.Operation) -> None:
    """Before ``op``: fail at run time unless the shape its blocked result is built with
    divides into the result's blocks."""
    for result in op.results:
        blocks = whole_blocks.dynamic_blocks(result.type)
        if not blocks:
            continue
        ty = ir.RankedTensorType(result.type)
        with ir.InsertionPoint(op), op.location:
            sizes = _source_sizes(op, ty)
            if sizes is None:
                continue
            bad = fatal.any_not_whole([(sizes[d], b) for d, b in blocks])
            text = message(where(op.location), name_of(func), result.type)
            fatal.fail_if(bad, text, sizes, module)


@dataclasses.dataclass(frozen=True)
class CheckWholeBlocksPass(SparsecompPass):
    """Check at run time that a dynamic-shape BSR tensor is built of whole blocks.

    The upstream sparsifier stores a blocked dimension as whole blocks: a
    tensor's dimension size is its level size times the block, so a 3x6
    matrix converted to a ``tensor<?x?xf64, #BSR>`` with 2x2 blocks is 4x6
    to it (garbage, silently). ``sparse-iter-mark-upstream`` holds such
    types as CSR, except those whose storage a function reads
    (``sparse_tensor.positions``, ``print``, ...), which keep their blocks;
    so in the fallback's module a blocked ``#sparse_tensor`` type of dynamic
    shape is one of those. Where such a tensor is built from a shape, a
    ``sparse_tensor.convert`` (its source's shape) or a ``tensor.empty`` /
    ``bufferization.alloc_tensor`` (its sizes), this pass checks that each
    blocked dimension is a multiple of its block; if not, the program
    reports the shape and exits with status 1 (``sparsecomp.ir.fatal``; a call
    from Python raises ``KernelError``).
    Tensors made from such tensors (inserts, ``linalg`` outputs, calls) have
    their shape; arguments of public functions are checked in the wrapper
    ``sparse-iter-wrap-upstream`` builds. Other ops are left alone. Runs on
    the fallback's module before the sparsifier.

    Before:

    ```mlir
    %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #BSR>
    ```

    After:

    ```mlir
    %m = tensor.dim %d, %c0 : tensor<?x?xf64>
    %n = tensor.dim %d, %c1 : tensor<?x?xf64>
    %bad = ... (%m mod 2 != 0) or (%n mod 2 != 0) ...
    scf.if %bad {
      func.call @__sparsecomp_fatal_0(%m, %n) : (index, index) -> ()  // dprintf, exit(1)
    }
    %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #BSR>
    ```
    """

    NAME = "sparse-iter-check-whole-blocks"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for func in functions(op):
            for inner in preorder(func):
                check_op(inner, func, op)
