"""Pass ``sparse-iter-sparse-mma-operands``."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.calls import functions
from sparsecomp.ir.targets import function_target
from sparsecomp.targets import CudaTarget
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.gpu_tensorize import _is_2_4, is_matmul

#: the element types of the products sparse tensor cores take (A, B) -> C: an f32 or an
#: f16 accumulator, as for ``nm[2, 4]`` (an f16 C had stayed off them in this form)
_TYPES = (("f16", "f16", "f32"), ("f16", "f16", "f16"))
#: ops that read only an argument's shape, which any layout has (a result sized by
#: ``tensor.dim`` of the matrix, as every example writes it, had kept it off them)
_SHAPE_ONLY = ("tensor.dim",)


@dataclasses.dataclass(frozen=True)
class SparseMmaOperandsPass(SparsecompPass):
    """Give a 2:4 matrix that a GPU multiplies the layout its sparse tensor cores read.

    A ``#sparse_iter`` program that declares 2:4 sparsity (``nm[2, 4]``) gets,
    on a CUDA target with sparse MMAs (``mma.sp``, sm_80 and later), the 2:4
    layout whose metadata is laid out as ``mma.sp.m16n8k16`` reads it
    (``nmMetadata = mma_sp_m16n8k16``: the resolver, ``targets/resolve.py``),
    where it is the first operand of an f16 x f16 -> f32 (or f16) matrix product; that
    product then runs on the sparse tensor cores (``sparse-iter-gpu-tensorize``).
    A program written with a concrete layout, as MLIR's own sm80-lt tests
    write 2:4 (``#sparse_tensor.encoding<{map = (i, j) -> (i : dense, j
    floordiv 4 : dense, j mod 4 : structured[2, 4])}>``, imported as a
    ``#sparse_iter.layout``), had plain 2:4 metadata (each kept entry's
    column) and took the scalar schedule, silently. This pass gives such a
    function argument the ``mma.sp`` metadata where every use of it is the
    first operand of such a product (f16 x f16 -> f32 or f16) in a function for
    such a target, or reads only its shape (``tensor.dim``): the runtime packs
    the caller's matrix into the argument's layout, so callers see no
    difference. An argument with any other use, a layout that names
    its metadata (``nmMetadata = indices``), other element types and CPU
    targets are left as they are. Runs in the layouts stage, after named ops
    are generalized.

    Before (``#nv24`` the upstream layout above, imported):

    ```mlir
    func.func @matmul(%a: tensor<?x?xf16, #nv24>, %b: tensor<?x?xf16>,
                      %c: tensor<?x?xf32>) -> tensor<?x?xf32>
        attributes {sparse_iter.target = "gpu"} {
      %0 = linalg.generic #matmul ins(%a, %b : ...) outs(%c : tensor<?x?xf32>) {...}
      ...
    ```

    After: ``%a : tensor<?x?xf16, #sparse_iter.layout<{map = (d0, d1) -> (d0 :
    dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), nmMetadata =
    mma_sp_m16n8k16}>>``, in the signature and at its uses.
    """

    NAME = "sparse-iter-sparse-mma-operands"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for fn in functions(op):
            if len(fn.regions[0].blocks) == 0:
                continue  # a declaration
            target = function_target(fn)
            if not isinstance(target, CudaTarget) or not target.sparse_mma_shapes:
                continue
            if "m16n8k16" not in target.sparse_mma_shapes:
                continue  # the shape of the 2:4 tensor-core kernel's mma.sp
            metadata = "mma_sp_m16n8k16"
            entry = fn.regions[0].blocks[0]
            changed = False
            for arg in entry.arguments:
                layout = _sparse_mma_layout(arg, metadata)
                if layout is not None:
                    ty = ir.RankedTensorType(arg.type)
                    encoding = ir.Attribute.parse(layout.attr_text())
                    new = ir.RankedTensorType.get(ty.shape, ty.element_type, encoding, fn.location)
                    arg.set_type(new)
                    changed = True
            if changed:
                fty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
                inputs = [a.type for a in entry.arguments]
                fn.attributes["function_type"] = ir.TypeAttr.get(
                    ir.FunctionType.get(inputs, fty.results)
                )


def _sparse_mma_layout(arg: ir.Value, metadata: str) -> Layout | None:
    """The ``mma.sp`` layout for ``arg`` if it is a plain 2:4 matrix that only sparse
    MMA products read as their first operand (see the pass), else None."""
    layout = layout_of(arg.type)
    if not isinstance(layout, Layout) or layout.nm_metadata or metadata != "mma_sp_m16n8k16":
        return None
    if not _is_2_4(layout):
        return None  # not 2:4 along rows
    wanted = replace(layout, nm_metadata=metadata, crd_width=32)  # its words are 32-bit
    uses = list(arg.uses)
    if not uses:
        return None
    products = 0
    for use in uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if user.name in _SHAPE_ONLY:
            continue
        if use.operand_number != 0 or not is_matmul(user) or len(user.results) != 1:
            return None
        types = [ir.RankedTensorType(v.type).element_type for v in user.operands]
        if tuple(str(t) for t in types) not in _TYPES:
            return None
        products += 1
        if any(layout_of(v.type) is not None for v in list(user.operands)[1:]):
            return None
    return wanted if products else None
