"""Pass ``sparse-iter-drop-destination-results``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import func as func_d
from mlir.dialects import memref
from mlir.passmanager import ExternalPass

from sparsecomp.ir.calls import callees
from sparsecomp.ir.destinations import DESTINATIONS, destinations, marked, returns
from sparsecomp.transforms.base import SparsecompPass


def _source(value: ir.Value) -> ir.Value:
    """The buffer ``value`` is: through ``memref.cast``, and ``scf.for`` results whose
    loop yields its iter_arg unchanged (bufferization leaves those)."""
    while not isinstance(value, ir.BlockArgument):
        op = value.owner
        if op.name == "memref.cast":
            value = op.operands[0]
            continue
        if op.name != "scf.for":
            break
        number = ir.OpResult(value).result_number
        body = op.regions[0].blocks[0]
        yielded = list(body.operations)[-1].operands[number]
        if yielded != body.arguments[1 + number]:
            break
        value = op.operands[3 + number]
    return value


def drop(func: ir.Operation) -> None:
    """Drop ``func``'s results that have a destination, copying where one is not in it."""
    into = destinations(func)
    entry = func.regions[0].blocks[0]
    for ret in returns(func):
        kept = []
        for r, value in enumerate(ret.operands):
            if into[r] < 0:
                kept.append(value)
                continue
            dest = entry.arguments[into[r]]
            if _source(value) != dest:
                with ir.InsertionPoint(ret), ret.location:
                    memref.copy(value, dest)
        with ir.InsertionPoint(ret), ret.location:
            func_d.ReturnOp(kept)
        ret.erase()
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    results = [t for r, t in enumerate(fty.results) if into[r] < 0]
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(fty.inputs, results))
    del func.attributes[DESTINATIONS]


@dataclasses.dataclass(frozen=True)
class DropDestinationResultsPass(SparsecompPass):
    """Drop the results a function writes into its caller's arrays from its signature.

    Runs right after one-shot bufferization on the functions that
    ``sparse-iter-destinations`` prepared (``sparse_iter.destinations``).
    A result whose returned buffer is its destination argument (possibly
    through ``memref.cast`` or loops that carry it unchanged: bufferization
    built it there) is dropped; any
    other is first copied into the argument (``memref.copy``), and the
    buffer it was in becomes a temporary that buffer deallocation frees.
    The attribute goes: the function now returns only its other results,
    as ``sparse_iter.abi`` already says.

    Error: a function with destinations that the module itself calls (its
    callers would need rewriting; the runtime's variants are never called).

    Before:

    ```mlir
    func.func @spmm(..., %arg7: memref<?x?xf32>) -> memref<?x?xf32>
        attributes {sparse_iter.destinations = array<i64: 7>} {
      ...
      return %arg7 : memref<?x?xf32>
    }
    ```

    After:

    ```mlir
    func.func @spmm(..., %arg7: memref<?x?xf32>) {
      ...
      return
    }
    ```
    """

    NAME = "sparse-iter-drop-destination-results"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = marked(op)
        if not funcs:
            return
        called = callees(op)
        for func in funcs:
            name = ir.StringAttr(func.attributes["sym_name"]).value
            if name in called:
                func.location.emit_error(
                    f"sparse-iter-drop-destination-results: '@{name}' has destinations "
                    "and is called inside the module"
                )
                pass_.signal_pass_failure()
                continue
            drop(func)
