"""Pass ``sparse-iter-report-conversions``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.ir.context import emit_remark
from sparsecomp.ir.conversions import find_conversions
from sparsecomp.transforms.base import SparsecompPass

#: Encodings that specialization has not resolved into layouts yet.
_UNRESOLVED = ("#sparse_iter.sparsity", "#sparse_iter.encoding")


@dataclasses.dataclass(frozen=True)
class ReportConversionsPass(SparsecompPass):
    """Report every layout conversion as a remark at its location; change nothing.

    Run after ``sparsecomp-cpu-layouts`` (``sparse-iter-specialize-encodings``
    and ``sparse-iter-fold-encodings``): each ``sparse_iter.set_encoding``
    or ``unset_encoding`` left is a conversion the program runs, where a value crosses to another
    target or a use needs another layout. The remark names the function, the
    two layouts and the bytes of the tensor it builds: a number for dense
    results, ``a + b*nse`` (nse: stored entries) for sparse ones of static
    shape. ``exe.plan()`` gives the same list for a compiled program.

    ```mlir
    // remark: in 'f': converts a 4x6 float64 tensor from dense to
    //   #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), ...}>;
    //   20 + 12*nse bytes
    %s = sparse_iter.set_encoding %d : tensor<4x6xf64> to tensor<4x6xf64, #csr>
    ```

    ```
    $ sparsecomp-opt step.mlir -o /dev/null --pass-pipeline=\\
        'builtin.module(sparsecomp-cpu-layouts,sparse-iter-report-conversions)'
    step.mlir:12:10: remark: in 'step': converts a ?x? float32 tensor from
        #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), ...}> to
        #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), ...}>;
        bytes depend on the shape (dynamic)
    ```
    """

    NAME = "sparse-iter-report-conversions"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        found = find_conversions(op, "")
        for location, conversion in found:
            for side in (conversion.source, conversion.destination):
                if side.startswith(_UNRESOLVED):
                    location.emit_error(
                        f"{self.NAME}: {side} is not a layout yet; "
                        "run sparse-iter-specialize-encodings first"
                    )
                    pass_.signal_pass_failure()
                    return
        for location, conversion in found:
            emit_remark(location, conversion.describe())
