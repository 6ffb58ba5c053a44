"""Pass ``sparse-iter-destinations``: results computed in arrays the caller passes."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass, PassManager

from sparsecomp.ir.destinations import (
    DESTINATIONS,
    MATERIALIZE,
    destinations,
    is_destination,
    marked,
)
from sparsecomp.lowering.sizes import built_from
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.mark_entry_points import WRITABLE


def _set_writable(func: ir.Operation, numbers: set[int]) -> None:
    count = len(func.regions[0].blocks[0].arguments)
    if "arg_attrs" in func.attributes:
        attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
        old = [{n.name: n.attr for n in ir.DictAttr(d)} for d in attrs]
    else:
        old = [{} for _ in range(count)]
    for number in numbers:
        old[number][WRITABLE] = ir.BoolAttr.get(True)
    func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in old])


def _fold_materializations(func: ir.Operation, built: bool) -> None:
    """Each ``materialize_in_destination`` into a destination argument, replaced by its
    source (``built``: only those whose source is already built in the argument).

    As tensors the op is its source's value. Once the source is built in the
    destination it only stands in the way of one-shot bufferization (which reads
    it as a second write to the argument); a source built elsewhere is copied in
    by ``sparse-iter-drop-destination-results``.
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        dest = op.operands[1] if op.name == MATERIALIZE else None
        if dest is None or not is_destination(dest):
            return ir.WalkResult.ADVANCE
        if not built or built_from(op.operands[0]) == built_from(dest):
            found.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    for op in found:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()


@dataclasses.dataclass(frozen=True)
class DestinationsPass(SparsecompPass):
    """Compute a function's results in the arrays its caller passes for them.

    ``sparse_iter.destinations = array<i64: ...>`` on a public function gives,
    per result, the (flattened) argument that receives it, or -1. The runtime
    compiles such a variant of a function for a call with ``out=`` (and
    ``compiler.variants.with_destinations`` writes it: a
    ``bufferization.materialize_in_destination`` of each such result into its
    argument before the return). This pass, run after
    ``sparse-iter-mark-entry-points`` and before one-shot bufferization:

    * marks those arguments ``bufferization.writable = true`` (every other
      argument of an entry point stays read-only);
    * replaces each materialization whose source is already built in its
      argument (an ``outs`` operand accumulated in place) by that source;
    * runs upstream's ``eliminate-empty-tensors`` on the module (only there
      does its analysis see function arguments as writable; a module
      without destinations is left alone), so that the ``tensor.empty`` a
      result is built in becomes the argument: the kernel writes the
      caller's array directly, with no allocation;
    * replaces each remaining materialization by its source value.

    One-shot bufferization then writes each result into its argument where
    its analysis allows (the result of an in-place chain from the argument
    is the argument's buffer) and copies otherwise;
    ``sparse-iter-drop-destination-results`` then drops the results from the
    signature. The runtime checks that a destination shares no memory with
    any other argument (bufferization assumes that arguments do not alias).

    Before:

    ```mlir
    func.func @spmm(%A: tensor<?xi32>, ..., %D: tensor<?x?xf32> {bufferization.writable = false})
        -> tensor<?x?xf32> attributes {sparse_iter.destinations = array<i64: 5>} {
      %e = tensor.empty(%m, %n) : tensor<?x?xf32>
      %r = scf.for ... iter_args(%t = %e) ...
      %d = bufferization.materialize_in_destination %r in %D : ...
      return %d : tensor<?x?xf32>
    ```

    After:

    ```mlir
    func.func @spmm(..., %D: tensor<?x?xf32> {bufferization.writable = true}) ... {
      %r = scf.for ... iter_args(%t = %D) ...
      return %r : tensor<?x?xf32>
    ```
    """

    NAME = "sparse-iter-destinations"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = marked(op)
        if not funcs:
            return
        for func in funcs:
            numbers = {n for n in destinations(func) if n >= 0}
            count = len(func.regions[0].blocks[0].arguments)
            if any(n >= count for n in numbers):
                func.location.emit_error(
                    f"{DESTINATIONS} names argument {max(numbers)} of a function "
                    f"with {count} arguments"
                )
                pass_.signal_pass_failure()
                continue
            _set_writable(func, numbers)
            _fold_materializations(func, built=True)  # already in place: nothing to eliminate
        try:  # on the module: only there does the analysis see arguments as writable
            PassManager.parse("builtin.module(eliminate-empty-tensors)", op.context).run(op)
        except ir.MLIRError as err:
            op.location.emit_error(f"sparse-iter-destinations: eliminate-empty-tensors: {err}")
            pass_.signal_pass_failure()
            return
        for func in funcs:
            _fold_materializations(func, built=False)
