"""Pass ``sparse-iter-parallelize``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import scf
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.lowering import hints
from sparsecomp.transforms.base import SparsecompPass

#: Unit attribute on an ``scf.for`` whose iterations may run in any order.
PARALLEL_ATTR = "sparse_iter.parallel"


def _marked_ops(root: ir.Operation) -> list[ir.Operation]:
    """Ops carrying the mark, outer before inner (pre-order)."""
    return [op for op in preorder(root) if PARALLEL_ATTR in op.attributes]


def _mark_error(op: ir.Operation) -> str | None:
    """Why the mark on ``op`` is malformed, or None."""
    if op.name != "scf.for":
        return f"'{PARALLEL_ATTR}' marks scf.for loops only, not '{op.name}'"
    if not isinstance(op.attributes[PARALLEL_ATTR], ir.UnitAttr):
        return f"'{PARALLEL_ATTR}' must be a unit attribute"
    if any(isinstance(r.type, ir.RankedTensorType | ir.UnrankedTensorType) for r in op.results):
        return (
            f"a '{PARALLEL_ATTR}' loop still carries tensors: "
            "sparse-iter-parallelize runs after bufferization"
        )
    return None


def _can_parallelize(op: ir.Operation) -> bool:
    """Whether the marked ``scf.for`` maps onto ``scf.parallel`` as it is."""
    induction = op.regions[0].blocks[0].arguments[0]
    return (
        len(op.results) == 0
        and isinstance(induction.type, ir.IndexType)
        and "unsignedCmp" not in op.attributes
    )


def _inside_parallel(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.name != "builtin.module":
        if parent.name == "scf.parallel":
            return True
        parent = parent.parent
    return False


def for_to_parallel(op: ir.Operation) -> None:
    """Replace a result-free ``scf.for`` by an ``scf.parallel`` with the same body."""
    lower, upper, step = op.operands[0], op.operands[1], op.operands[2]
    parallel = scf.ParallelOp(
        [], [lower], [upper], [step], [], loc=op.location, ip=ir.InsertionPoint(op)
    )
    for name in hints.ALL:  # a part's hints for the GPU schedule
        if name in op.attributes:
            parallel.operation.attributes[name] = op.attributes[name]
    body = op.regions[0].blocks[0]
    body.append_to(parallel.region)  # the induction variable stays the block argument
    terminator = body.operations[len(body.operations) - 1]
    with ir.InsertionPoint(terminator), op.location:
        scf.ReduceOp([], 0)
    terminator.erase()
    op.erase()


@dataclasses.dataclass(frozen=True)
class ParallelizePass(SparsecompPass):
    """Turn scf.for loops marked sparse_iter.parallel into scf.parallel.

    Runs on memrefs, after bufferization and a canonicalization that drops the
    loop-carried buffers every iteration yields back unchanged (the output of
    a row loop). It matches every ``scf.for`` carrying the unit attribute
    ``sparse_iter.parallel`` (set by the loop lowering where iterations touch
    disjoint data) and, when the loop has no results, an ``index`` induction
    variable and signed bounds, replaces it by an ``scf.parallel`` with the
    same bounds, step and body, ready for ``convert-scf-to-openmp``.

    Left alone, with the mark dropped: loops that still carry values (a
    reduction, or a buffer that bufferization had to copy), loops over other
    integer types or with ``unsignedCmp``, and marked loops nested in a loop
    this pass already made parallel (a nested OpenMP region would only be
    serialized). Unmarked loops are never touched.

    Errors: the mark on anything other than ``scf.for``, a mark that is not a
    unit attribute, and a marked loop that still carries tensors (the pass ran
    before bufferization).

    Before:

    ```mlir
    scf.for %i = %c0 to %m step %c1 {
      %v = memref.load %x[%i] : memref<?xf32>
      memref.store %v, %y[%i] : memref<?xf32>
    } {sparse_iter.parallel}
    ```

    After:

    ```mlir
    scf.parallel (%i) = (%c0) to (%m) step (%c1) {
      %v = memref.load %x[%i] : memref<?xf32>
      memref.store %v, %y[%i] : memref<?xf32>
      scf.reduce
    }
    ```
    """

    NAME = "sparse-iter-parallelize"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        marked = _marked_ops(op)
        errors = [(m, msg) for m in marked if (msg := _mark_error(m)) is not None]
        for bad, message in errors:
            bad.location.emit_error(message)
        if errors:
            pass_.signal_pass_failure()
            return
        for loop in marked:  # outer loops first: inner marks see their new parent
            if _can_parallelize(loop) and not _inside_parallel(loop):
                for_to_parallel(loop)
            else:
                del loop.attributes[PARALLEL_ATTR]
