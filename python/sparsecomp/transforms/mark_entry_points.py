"""Pass ``sparse-iter-mark-entry-points``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.transforms.base import SparsecompPass

WRITABLE = "bufferization.writable"
C_INTERFACE = "llvm.emit_c_interface"


def _is_public_definition(op: ir.Operation) -> bool:
    if op.name != "func.func" or len(op.regions[0].blocks) == 0:
        return False
    visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
    return visibility is None or ir.StringAttr(visibility).value == "public"


def _entry_points(module: ir.Operation) -> list[ir.Operation]:
    """Public ``func.func`` definitions directly in the module."""
    ops = [op.operation for op in module.regions[0].blocks[0].operations]
    return [op for op in ops if _is_public_definition(op)]


def _argument_attrs(func: ir.Operation) -> list[dict[str, ir.Attribute]]:
    count = len(func.regions[0].blocks[0].arguments)
    if "arg_attrs" not in func.attributes:
        return [{} for _ in range(count)]
    return [
        {named.name: named.attr for named in ir.DictAttr(d)}
        for d in ir.ArrayAttr(func.attributes["arg_attrs"])
    ]


def mark_entry_point(func: ir.Operation) -> list[int]:
    """Mark ``func``; the indices of arguments explicitly declared writable (errors)."""
    arguments = func.regions[0].blocks[0].arguments
    attrs = _argument_attrs(func)
    writable = []
    for index, (argument, named) in enumerate(zip(arguments, attrs, strict=True)):
        if not isinstance(argument.type, ir.RankedTensorType | ir.UnrankedTensorType):
            continue
        old = named.get(WRITABLE)
        if old is not None and ir.BoolAttr(old).value:
            writable.append(index)
        named[WRITABLE] = ir.BoolAttr.get(False)
    if any(WRITABLE in a for a in attrs):
        func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in attrs])
    func.attributes[C_INTERFACE] = ir.UnitAttr.get()
    return writable


@dataclasses.dataclass(frozen=True)
class MarkEntryPointsPass(SparsecompPass):
    """Mark public functions as C entry points: read-only tensor arguments, C interface.

    Public functions are called from outside (the runtime, through ctypes), so
    their arrays belong to the caller. For every public ``func.func``
    definition this pass sets ``bufferization.writable = false`` on each tensor
    argument, so that one-shot bufferization copies an argument before writing
    into it instead of writing into the caller's array, and sets
    ``llvm.emit_c_interface`` on the function, so that ``convert-func-to-llvm``
    emits the ``_mlir_ciface_<name>`` wrapper taking memref descriptors by
    pointer. Private functions and declarations are left alone: one-shot
    bufferization sees all their callers.

    Error: a public tensor argument already marked ``bufferization.writable =
    true`` (a kernel must never mutate caller arrays).

    Before:

    ```mlir
    func.func @spmv(%pos: tensor<?xi32>, %m: index) -> tensor<?xf32>
    ```

    After:

    ```mlir
    func.func @spmv(%pos: tensor<?xi32> {bufferization.writable = false}, %m: index)
        -> tensor<?xf32> attributes {llvm.emit_c_interface}
    ```
    """

    NAME = "sparse-iter-mark-entry-points"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        failed = False
        for func in _entry_points(op):
            for index in mark_entry_point(func):
                name = ir.StringAttr(func.attributes["sym_name"]).value
                func.location.emit_error(
                    f"argument #{index} of public function '@{name}' is declared writable; "
                    "entry points must not write caller arrays"
                )
                failed = True
        if failed:
            pass_.signal_pass_failure()
