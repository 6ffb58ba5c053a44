"""Pass ``sparse-iter-decompose-aggregates``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mlir import ir
from mlir.dialects.transform import interpreter
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass


def _softmax_refusal(op: ir.Operation) -> str | None:
    """Why upstream's softmax decomposition cannot take ``op`` (it asserts on these)."""
    types = [v.type for v in op.operands]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        return "on buffers is not supported: its decomposition takes tensors; write it on tensors"
    element = ir.RankedTensorType(types[0]).element_type
    if not isinstance(element, ir.FloatType):
        return (
            f"of {element} elements is not supported: its decomposition (max, exp, sum, divide) "
            "needs floating-point elements; convert the input to a float type first"
        )
    return None


#: The aggregate ops of MLIR 22's linalg (ops implementing AggregatedOpInterface),
#: each with what rules out its decomposition. test_decompose_aggregates.py checks
#: that the other non-structured linalg ops do not decompose.
AGGREGATES: dict[str, Callable[[ir.Operation], str | None]] = {
    "linalg.softmax": _softmax_refusal,
}
#: Upstream's decomposition, applied to every aggregate op.
_SCRIPT = """
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: !transform.any_op {{transform.readonly}}) {{
    %ops = transform.structured.match ops{{{names}}} in %root
        : (!transform.any_op) -> !transform.any_op
    %parts = transform.structured.decompose_interface %ops
        : (!transform.any_op) -> !transform.any_op
    transform.yield
  }}
}}
"""


def script(names: list[str]) -> str:
    """The transform module that decomposes every op called one of ``names``."""
    return _SCRIPT.format(names="[" + ", ".join(f'"{n}"' for n in names) + "]")


def retype_results(root: ir.Operation) -> None:
    """Give each ``linalg.generic`` result the type of its init, where it differs.

    Upstream's softmax decomposition types its ``exp(x - max)`` step like the
    input, as if input and output had one type; with a sparse input and a
    dense output (or the reverse) that step is invalid. The input program was
    verified, so only steps the decomposition made can differ.
    """
    for op in preorder(root):
        if op.name != "linalg.generic":
            continue
        inits = list(op.operands)[len(op.operands) - len(op.results) :]
        for result, init in zip(op.results, inits, strict=True):
            if result.type != init.type:
                result.set_type(init.type)


@dataclasses.dataclass(frozen=True)
class DecomposeAggregatesPass(SparsecompPass):
    """Decompose aggregate linalg ops (``linalg.softmax``) into the ops they are made of.

    An aggregate op (one implementing MLIR's ``AggregatedOpInterface``; in
    MLIR 22 ``linalg.softmax`` is the only linalg one) is not a structured op:
    it has no indexing maps, and neither sparsecomp's lowering nor upstream's
    ``convert-linalg-to-loops`` takes it. This pass applies upstream's
    decomposition (``transform.structured.decompose_interface``, through the
    transform interpreter) to each of them, so that the rest of the pipeline
    sees ``linalg.fill`` and ``linalg.generic`` ops only, on dense and sparse
    operands alike (a sparse input's implicit zeros take part in the max and
    the sum). The new ops keep the aggregate's location. Structured ops and
    the other non-structured linalg ops (``linalg.pack``, the Winograd
    transforms) are left alone.

    Errors: ``linalg.softmax`` on memrefs, or of elements that are not
    floating point (upstream's decomposition would abort on either).

    Before:

    ```mlir
    %r = linalg.softmax dimension(1) ins(%x : tensor<4x8xf64>)
        outs(%e : tensor<4x8xf64>) -> tensor<4x8xf64>
    ```

    After (the max, shifted exponent, sum and quotient along dimension 1):

    ```mlir
    %max = linalg.generic {iterator_types = ["parallel", "reduction"]} ...  // arith.maxnumf
    %exp = linalg.generic {iterator_types = ["parallel", "parallel"]} ...   // math.exp(x - max)
    %sum = linalg.generic {iterator_types = ["parallel", "reduction"]} ...  // arith.addf
    %r = linalg.generic {iterator_types = ["parallel", "parallel"]} ...     // arith.divf
    ```
    """

    NAME = "sparse-iter-decompose-aggregates"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        found = [inner for inner in preorder(op) if inner.name in AGGREGATES]
        if not found:
            return
        refused = False
        for inner in found:
            why = AGGREGATES[inner.name](inner)
            if why is not None:
                inner.location.emit_error(f"'{inner.name}' {why}")
                refused = True
        if refused:
            pass_.signal_pass_failure()
            return
        transforms = ir.Module.parse(script(sorted({inner.name for inner in found})))
        try:
            interpreter.apply_named_sequence(op, transforms.body.operations[0], transforms)
        except (ValueError, ir.MLIRError) as exc:  # the interpreter raises ValueError
            op.location.emit_error(f"sparse-iter-decompose-aggregates: {exc}")
            pass_.signal_pass_failure()
            return
        retype_results(op)
