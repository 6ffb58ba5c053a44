"""Pass ``sparse-iter-check-reshapes``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, tensor
from mlir.passmanager import ExternalPass

from sparsecomp.ir import fatal
from sparsecomp.ir.calls import functions, name_of
from sparsecomp.ir.fatal import where
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass


def _encoded(ty: ir.Type) -> bool:
    return isinstance(ty, ir.RankedTensorType) and ty.encoding is not None


def _size(value: ir.Value, d: int) -> ir.Value:
    ty = ir.RankedTensorType(value.type)
    index = ir.IndexType.get()
    if ty.is_dynamic_dim(d):
        return tensor.DimOp(value, arith.ConstantOp(index, d).result).result
    return arith.ConstantOp(index, ty.shape[d]).result


def check_op(op: ir.Operation, func: ir.Operation, module: ir.Operation) -> bool:
    """Before a ``tensor.expand_shape`` of a sparse tensor: fail at run time unless the
    sizes of each group of its result multiply out to the source dimension's; false
    (an error at the op) for a group with more than one dynamic size."""
    if op.name != "tensor.expand_shape":
        return True
    source, result = op.operands[0], op.results[0]
    if not (_encoded(source.type) or _encoded(result.type)):
        return True
    groups = [
        [ir.IntegerAttr(d).value for d in g] for g in ir.ArrayAttr(op.attributes["reassociation"])
    ]
    static = list(ir.DenseI64ArrayAttr(op.attributes["static_output_shape"]))
    for d, group in enumerate(groups):
        unknown = [k for k in group if static[k] == ir.ShapedType.get_dynamic_size()]
        if len(unknown) > 1:
            op.location.emit_error(
                f"'{name_of(func)}' expands dimension {d} of a sparse tensor into "
                f"{len(unknown)} dynamic sizes (result dimensions "
                f"{', '.join(map(str, unknown))}): the sparsifier reshapes a sparse tensor "
                "with at most one dynamic size in each group (with two it gave every new "
                "dimension the source's size); give all but one of them as constants, or "
                "reshape a dense copy"
            )
            return False
    dynamic = iter(list(op.operands)[1:])
    index = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        sizes = [
            next(dynamic) if s == ir.ShapedType.get_dynamic_size()
            else arith.ConstantOp(index, s).result
            for s in static
        ]  # fmt: skip
        for d, group in enumerate(groups):
            if all(static[k] != ir.ShapedType.get_dynamic_size() for k in group):
                continue  # all static: the verifier checked them against a static source
            product = sizes[group[0]]
            for k in group[1:]:
                product = arith.MulIOp(product, sizes[k]).result
            have = _size(source, d)
            bad = arith.CmpIOp(arith.CmpIPredicate.ne, product, have).result
            text = (
                f"{where(op.location)}error: '{name_of(func)}' expands dimension {d} of "
                f"{source.type}, of size {{}}, into sizes whose product is {{}} "
                "(tensor.expand_shape's output_shape must multiply out to it)"
            )
            fatal.fail_if(bad, text, [have, product], module)
    return True


@dataclasses.dataclass(frozen=True)
class CheckReshapesPass(SparsecompPass):
    """Check at run time that a ``tensor.expand_shape`` of a sparse tensor is given
    sizes that multiply out to its source's.

    MLIR leaves an ``output_shape`` whose product differs from the source
    dimension undefined, and the sparsifier's reshape of a sparse tensor
    then writes positions past its buffers (a vector of 10 entries expanded
    to ``[10 floordiv 4, 4]``: invalid positions, or a corrupted heap and
    a crash later). A group with two dynamic sizes or more is refused, at the
    op: the sparsifier gave each of them the source dimension's size (a 12 x 5
    matrix expanded to ``[%q, %m, 5]`` came out 12 x 12 x 5, whatever ``%q``
    and ``%m``). Before each op with a dynamic size in a group, this
    pass compares the group's product with the source dimension; if they
    differ, the program reports both with the op's location and exits with
    status 1 (``sparsecomp.ir.fatal``; a call from Python raises
    ``KernelError``). Runs on the fallback's module before the sparsifier (the
    ops that reach it).

    Before:

    ```mlir
    %r = tensor.expand_shape %a [[0, 1]] output_shape [%m, 4]
        : tensor<?xf64, #SV> into tensor<?x4xf64, #CSR>
    ```

    After:

    ```mlir
    %p = arith.muli %m, %c4 : index
    %n = tensor.dim %a, %c0 : tensor<?xf64, #SV>
    %bad = arith.cmpi ne, %p, %n : index
    scf.if %bad {
      func.call @__sparsecomp_fatal_0(%n, %p) : (index, index) -> ()  // dprintf, exit(1)
    }
    %r = tensor.expand_shape %a [[0, 1]] output_shape [%m, 4] : ...
    ```
    """

    NAME = "sparse-iter-check-reshapes"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for func in functions(op):
            for inner in list(preorder(func)):
                if not check_op(inner, func, op):
                    pass_.signal_pass_failure()
                    return
