"""Pass ``sparse-iter-set-encodings``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir._mlir_libs._mlirDialectsLinalg import get_indexing_maps
from mlir.passmanager import ExternalPass

from sparsecomp.ir.attrs import encoding_of, mnemonic
from sparsecomp.ir.walk import preorder
from sparsecomp.targets.resolve import Encoding, IndexingMap, Use
from sparsecomp.transforms.base import SparsecompPass

SET = "sparse_iter.set_encoding"


def indexing_maps(op: ir.Operation) -> ir.ArrayAttr | None:
    """The indexing maps of a linalg structured op (named ops included), else None."""
    if not op.name.startswith("linalg."):
        return None
    return get_indexing_maps(op)


def sparsity_of(ty: ir.Type) -> ir.Attribute | None:
    """The ``#sparse_iter.sparsity`` encoding of a tensor type, if that is its encoding."""
    enc = encoding_of(ty)
    return enc if enc is not None and mnemonic(enc) == "sparsity" else None


def _element_type(ty: ir.Type) -> ir.Type:
    return ir.ShapedType(ty).element_type if isinstance(ty, ir.ShapedType) else ty


def with_encoding(ty: ir.Type, encoding: ir.Attribute, loc: ir.Location) -> ir.Type:
    rt = ir.RankedTensorType(ty)
    return ir.RankedTensorType.get(rt.shape, rt.element_type, encoding, loc=loc)


def set_encoding(value: ir.Value, ty: ir.Type, ip: ir.InsertionPoint, loc: ir.Location) -> ir.Value:
    """``sparse_iter.set_encoding value : ... to ty`` at ``ip``."""
    with ip, loc:
        return ir.Operation.create(SET, results=[ty], operands=[value]).result


def _op_encoding(sparsity: ir.Attribute, op: ir.Operation, index: int) -> ir.Attribute:
    maps = indexing_maps(op)
    assert maps is not None
    texts = tuple(str(m) for m in maps)
    use = Use(
        op.name,
        index,
        tuple(str(_element_type(v.type)) for v in op.operands),
        tuple(IndexingMap.parse(t) for t in texts),
        texts,
    )
    return ir.Attribute.parse(Encoding(Encoding.parse(str(sparsity)).sparsity, use).attr_text())


def encode_operands(op: ir.Operation) -> None:
    """Give each sparsity-typed operand (and tied result) of a linalg op its op encoding."""
    first_init = len(op.operands) - len(op.results)
    for i, value in enumerate(list(op.operands)):
        sparsity = sparsity_of(value.type)
        if sparsity is None:
            continue
        ty = with_encoding(value.type, _op_encoding(sparsity, op, i), op.location)
        op.operands[i] = set_encoding(value, ty, ir.InsertionPoint(op), op.location)
        if i >= first_init:
            _reencode_result(op, op.results[i - first_init], ty)


def _reencode_result(op: ir.Operation, result: ir.Value, ty: ir.Type) -> None:
    """The result takes its init's encoding; its users get the sparsity type back."""
    original = result.type
    result.set_type(ty)
    if not list(result.uses):
        return
    back = set_encoding(result, original, ir.InsertionPoint.after(op), op.location)
    result.replace_all_uses_except(back, back.owner.operation)


def _linalg_ops(root: ir.Operation) -> list[ir.Operation]:
    return [op for op in preorder(root) if indexing_maps(op) is not None]


@dataclasses.dataclass(frozen=True)
class SetEncodingsPass(SparsecompPass):
    """Attach op-context encodings to the sparse operands of linalg ops.

    For every linalg structured op (``linalg.generic`` and named ops such as
    ``linalg.matmul``, ``linalg.matvec``, ``linalg.batch_matmul``), each operand
    whose type carries only a ``#sparse_iter.sparsity`` goes through a
    ``sparse_iter.set_encoding`` to the same tensor with a
    ``#sparse_iter.encoding<sparsity, op_name = "<op name>", operand = <index>,
    element_types = [<of all operands>], indexing_maps = [<of the op>]>``, IREE's
    ``SetEncoding`` for sparsity: the encoding records how the op uses the
    tensor, so that ``sparse-iter-specialize-encodings`` can choose a layout
    per use (CSC for a transposed read, etc.). Indexing maps of named ops are
    the ones ``linalg-generalize-named-ops`` would write.

    Results: a linalg result has the type of its init (``outs``) operand, so a
    sparse init makes the result carry the init's encoding too. Its users,
    which expect the sparsity type, get it back through a second
    ``set_encoding`` from the encoding to the sparsity (not ``unset_encoding``:
    that would go through a plain, dense tensor, and a later change of layout
    would then densify). After specialization both ends of every such
    ``set_encoding`` carry layouts; equal ones vanish, different ones are
    explicit conversions.

    Left alone: plain and layout-typed operands, operands already carrying a
    ``#sparse_iter.encoding`` (the pass is idempotent), and every op that is
    not a linalg structured op.

    Before:

    ```mlir
    #sp = #sparse_iter.sparsity<unstructured, density = 0.01>
    %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    ```

    After:

    ```mlir
    #enc = #sparse_iter.encoding<#sp, op_name = "linalg.matmul", operand = 0,
        element_types = [f32, f32, f32],
        indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                         affine_map<(d0, d1, d2) -> (d2, d1)>,
                         affine_map<(d0, d1, d2) -> (d0, d1)>]>
    %e = sparse_iter.set_encoding %a : tensor<?x?xf32, #sp> to tensor<?x?xf32, #enc>
    %0 = linalg.matmul ins(%e, %b : tensor<?x?xf32, #enc>, tensor<?x?xf32>)
                       outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    ```
    """

    NAME = "sparse-iter-set-encodings"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for linalg_op in _linalg_ops(op):
            encode_operands(linalg_op)
