"""Pass ``sparse-iter-sequentialize-racy-loops``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import scf
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Ops that give another view of a buffer: a write through one writes the buffer.
_VIEWS = ("memref.subview", "memref.cast", "memref.reinterpret_cast",
          "memref.collapse_shape", "memref.expand_shape")  # fmt: skip
#: Writes at the element their indices name: (op, operand number of the buffer).
_INDEXED = {
    "memref.store": 1,
    "vector.store": 1,
    "vector.transfer_write": 1,
    "vector.maskedstore": 0,
    "vector.compressstore": 0,
}
#: Ops that read a buffer, or only its sizes, or update an element atomically.
_HARMLESS = (
    "memref.load", "vector.load", "vector.transfer_read", "vector.maskedload",
    "vector.gather", "vector.expandload", "memref.dim", "memref.extract_strided_metadata",
    "memref.extract_aligned_pointer_as_index", "memref.atomic_rmw",
    "memref.generic_atomic_rmw", "memref.prefetch", *_VIEWS,
)  # fmt: skip


def _definer(value: ir.Value) -> ir.Operation:
    """The op that defines ``value``, or for a block argument the op of its region."""
    if isinstance(value, ir.OpResult):
        return value.owner.operation
    return ir.BlockArgument(value).owner.owner.operation


def _root(value: ir.Value) -> tuple[ir.Value, list[ir.Value]]:
    """The buffer a memref value views, and the operands (offsets, sizes) of the
    views on the way."""
    operands: list[ir.Value] = []
    while isinstance(value, ir.OpResult) and _definer(value).name in _VIEWS:
        view = _definer(value)
        operands += list(view.operands)[1:]
        value = view.operands[0]
    return value, operands


def _inside(value: ir.Value, loop: ir.Operation) -> bool:
    """Whether ``value`` is defined in ``loop``'s body (a buffer of one iteration)."""
    op: ir.Operation | None = _definer(value)
    if op == loop:  # its induction variables (or results)
        return False
    while op is not None:
        if op == loop:
            return True
        parent = op.parent
        op = parent.operation if parent is not None else None
    return False


def racy_write(loop: ir.Operation) -> ir.Operation | None:
    """The first op in ``loop``'s body that may write an element another iteration
    also writes, or None.

    A write is safe when its buffer is allocated in the body, or when every
    induction variable of ``loop`` is one of its indices (or an offset of a view
    on the way to the buffer): then no two iterations write one element. Atomic
    updates are safe. Any other op that takes a
    buffer from outside the loop, and is not known to only read it, counts as a
    racy write (conservatively: copies, linalg ops on buffers, calls).
    """
    ivs = list(loop.regions[0].blocks[0].arguments)

    def own(operands: list[ir.Value]) -> bool:
        return all(any(iv == o for o in operands) for iv in ivs)

    for op in preorder(loop)[1:]:
        if op.name in _HARMLESS:
            continue
        if op.name in _INDEXED:
            at = _INDEXED[op.name]
            root, views = _root(op.operands[at])
            if not (_inside(root, loop) or own(views + list(op.operands)[at + 1 :])):
                return op
            continue
        for value in op.operands:
            if isinstance(value.type, ir.MemRefType):
                root, views = _root(value)
                if not (_inside(root, loop) or own(views)):
                    return op
    return None


def _sequential(loop: ir.Operation) -> None:
    """Replace ``loop`` (no results) by a nest of ``scf.for``, one per dimension."""
    n = len(loop.regions[0].blocks[0].arguments)
    operands = list(loop.operands)
    lower, upper, step = operands[:n], operands[n : 2 * n], operands[2 * n : 3 * n]
    body = loop.regions[0].blocks[0]
    point = ir.InsertionPoint(loop)
    fors = []
    for k in range(n):
        with point, loop.location:
            nested = scf.ForOp(lower[k], upper[k], step[k])
            with ir.InsertionPoint(nested.body):
                end = scf.YieldOp([])
        fors.append(nested)
        point = ir.InsertionPoint(end)
    for op in list(body.operations)[:-1]:  # all but the scf.reduce terminator
        op.move_before(end)
    for argument, nested in zip(body.arguments, fors, strict=True):
        argument.replace_all_uses_with(nested.induction_variable)
    loop.erase()


@dataclasses.dataclass(frozen=True)
class SequentializeRacyLoopsPass(SparsecompPass):
    """Run sequentially each ``scf.parallel`` whose iterations may write one element.

    ``parallelization-strategy=dense-outer-loop`` makes the sparsifier's
    outermost dense loop an ``scf.parallel`` also where that loop is a reduction
    scattered into the output: SpMV over a CSC matrix (``y[row] += ...`` inside
    the loop over columns) or a CSR matrix's column sums. The stock sparsifier
    then lowers the loop sequentially, so the race never shows; with
    ``convert-scf-to-openmp`` the threads lost updates (sums short by 0.1-3%,
    different at every run). This pass looks at every write in each
    ``scf.parallel`` (:func:`racy_write`) and, where one may race, replaces the
    loop by ``scf.for`` loops. A loop with reductions (results) that may race is
    an error (the driver then builds the functions sequentially). Run it right
    before ``convert-scf-to-openmp``.

    Before:

    ```mlir
    scf.parallel (%j) = (%c0) to (%n) step (%c1) {
      scf.for %p = %lo to %hi step %c1 {
        %i = memref.load %crd[%p] : memref<?xindex>
        memref.store %v, %y[%i] : memref<?xf64>   // %i is not %j
      }
      scf.reduce
    }
    ```

    After:

    ```mlir
    scf.for %j = %c0 to %n step %c1 {
      scf.for %p = %lo to %hi step %c1 { ... }
    }
    ```
    """

    NAME = "sparse-iter-sequentialize-racy-loops"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        loops = [loop for loop in preorder(op) if loop.name == "scf.parallel"]
        for loop in reversed(loops):  # inner loops first: an outer one's rewrite moves them
            write = racy_write(loop)
            if write is None:
                continue
            if len(loop.results):
                loop.location.emit_error(
                    f"this parallel loop has reductions and may write one element from "
                    f"several iterations ({write.name} at {write.location})"
                )
                pass_.signal_pass_failure()
                return
            _sequential(loop)
