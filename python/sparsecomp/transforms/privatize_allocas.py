"""Pass ``sparse-iter-privatize-allocas``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass


def _parallel_ancestors(op: ir.Operation, stop: ir.Operation) -> list[ir.Operation]:
    """The ``scf.parallel`` ops enclosing ``op`` below ``stop``, innermost first."""
    found = []
    parent = op.parent
    while parent is not None and parent.operation != stop:
        if parent.name == "scf.parallel":
            found.append(parent.operation)
        parent = parent.parent
    return found if parent is not None else []


def _private_home(alloca: ir.Operation) -> ir.Operation | None:
    """The innermost ``scf.parallel`` holding every use of ``alloca`` (defined outside it)."""
    users = [use.owner.operation for use in alloca.results[0].uses]
    if not users:
        return None
    chains = [_parallel_ancestors(user, alloca.parent.operation) for user in users]
    common = [p for p in chains[0] if all(p in chain for chain in chains[1:])]
    return common[0] if common else None


@dataclasses.dataclass(frozen=True)
class PrivatizeAllocasPass(SparsecompPass):
    """Move scratch ``memref.alloca`` ops into the ``scf.parallel`` that uses them.

    The upstream sparsifier allocates the iterator scratch of a COO / DCSR
    level (``memref.alloca() : memref<?x4xindex>``) at the top of the
    function, also when ``parallelization-strategy=dense-outer-loop`` made
    the loop around its uses an ``scf.parallel``: the OpenMP threads then
    share one buffer and overwrite each other's cursors (wrong results,
    differing from call to call). An ``scf.parallel``'s iterations are
    independent, so a buffer used only inside its body cannot carry values
    from one iteration to another: each iteration may have its own.

    Matches every ``memref.alloca`` all of whose uses lie in the body of one
    ``scf.parallel`` that does not contain the alloca, and moves it to the
    start of the innermost such body (its size operands are defined above
    the loop). Allocas used outside any parallel loop, or also outside the
    loop, stay. Run it right before ``convert-scf-to-openmp``, which wraps
    each iteration in a ``memref.alloca_scope``, so the stack is released
    per iteration.

    Before:

    ```mlir
    %scratch = memref.alloca(%c1) : memref<?x4xindex>
    scf.parallel (%i) = (%c0) to (%n) step (%c1) {
      memref.store %p, %scratch[%c0, %c0] : memref<?x4xindex>
      ...
    }
    ```

    After:

    ```mlir
    scf.parallel (%i) = (%c0) to (%n) step (%c1) {
      %scratch = memref.alloca(%c1) : memref<?x4xindex>
      memref.store %p, %scratch[%c0, %c0] : memref<?x4xindex>
      ...
    }
    ```
    """

    NAME = "sparse-iter-privatize-allocas"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for alloca in preorder(op):
            if alloca.name != "memref.alloca":
                continue
            home = _private_home(alloca)
            if home is not None:
                body = home.regions[0].blocks[0]
                alloca.move_before(body.operations[0])
