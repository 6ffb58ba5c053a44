"""Pass ``sparse-iter-verify``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.transforms.base import SparsecompPass


@dataclasses.dataclass(frozen=True)
class VerifyPass(SparsecompPass):
    """Check the sparse_iter rules the dialect's ODS verifiers leave; change nothing.

    ODS verifies that attribute parameters and operands have the right kind;
    this pass checks their values: level formats, bit widths, n <= m, map
    arity against tensor rank, and that ``set_encoding``/``unset_encoding``
    change only the encoding. Every violation is an error at the first op
    whose types carry it. Every sparsecomp pass performs the same check on its
    input; this pass makes it available between upstream passes.

    Example of a rejected program:

    ```mlir
    // error: singleton level 1 must follow a nonunique compressed,
    //        loose_compressed or singleton level
    func.func private @f(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) ->
        (i : dense, j : singleton)}>>)
    ```
    """

    NAME = "sparse-iter-verify"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        # The base class already verified ``op`` before calling run().
        return None
