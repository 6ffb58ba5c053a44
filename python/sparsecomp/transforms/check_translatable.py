"""Pass ``sparse-iter-check-translatable``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.decompose_aggregates import AGGREGATES

#: Ops that LLVM IR translation understands, by name prefix (``gpu.binary``
#: and the ``gpu.launch_func`` ops of a CUDA build become module loads and
#: ``mgpuLaunchKernel`` calls).
TRANSLATABLE = ("llvm.", "omp.", "builtin.module", "gpu.binary", "gpu.launch_func")
CAST = "builtin.unrealized_conversion_cast"


def untranslatable(root: ir.Operation) -> list[ir.Operation]:
    """The outermost ops in ``root`` that LLVM IR translation cannot take, causes first.

    An op a lowering left behind comes with the ``builtin.unrealized_conversion_cast``
    ops that the conversions around it inserted: those follow the other ops.
    Ops nested in an untranslatable op are not listed.
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith(TRANSLATABLE):
            return ir.WalkResult.ADVANCE
        found.append(op)
        return ir.WalkResult.SKIP

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return [op for op in found if op.name != CAST] + [op for op in found if op.name == CAST]


def _types(values: ir.OpOperandList | ir.OpResultList) -> str:
    return ", ".join(str(v.type) for v in values)


def _why(op: ir.Operation) -> str:
    if op.name in AGGREGATES:
        return (
            "aggregate ops are decomposed by sparse-iter-decompose-aggregates, which "
            "sparsecomp-cpu-layouts runs first; lower the program with the whole "
            "sparsecomp-cpu pipeline"
        )
    return "no stage of the pipeline lowers it (docs/coverage.md lists what sparsecomp compiles)"


@dataclasses.dataclass(frozen=True)
class CheckTranslatablePass(SparsecompPass):
    """Refuse ops that no stage lowered to the LLVM dialect; change nothing.

    Runs last in the CPU code generation: what is left must be LLVM dialect
    (or OpenMP, or a CUDA build's ``gpu.binary`` and ``gpu.launch_func``),
    the ops LLVM IR translation takes. Upstream's conversions are partial:
    an op none of them lowers stays, wrapped in
    ``builtin.unrealized_conversion_cast`` ops that
    ``reconcile-unrealized-casts`` keeps, and the pipeline still succeeded.
    This pass turns that into an error at the op no stage lowered (each
    outermost one), so that ``sparsecomp-opt`` fails where
    ``sparsecomp.compile`` would; a cast is named only where nothing else is
    left (a value whose type no conversion took).

    Example of a rejected module (a memref op after ``finalize-memref-to-llvm``
    would have been lowered; this one never met it):

    ```mlir
    // error: 'memref.alloca' was not lowered to the LLVM dialect
    llvm.func @f() {
      %0 = memref.alloca() : memref<4xf32>
      llvm.return
    }
    ```
    """

    NAME = "sparse-iter-check-translatable"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        left = untranslatable(op)
        causes = [inner for inner in left if inner.name != CAST] or left[:1]
        for inner in causes:
            if inner.name == CAST:
                inner.location.emit_error(
                    f"'{CAST}' from ({_types(inner.operands)}) to ({_types(inner.results)}) "
                    "was left by the lowering to the LLVM dialect: no conversion took a value "
                    "of this type"
                )
            else:
                inner.location.emit_error(
                    f"'{inner.name}' was not lowered to the LLVM dialect: {_why(inner)}"
                )
        if causes:
            pass_.signal_pass_failure()
