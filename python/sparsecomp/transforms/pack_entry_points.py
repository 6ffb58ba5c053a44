"""Pass ``sparse-iter-pack-entry-points``."""

from __future__ import annotations

import dataclasses
import json
import re

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.runtime.abi import CIFACE, packed_symbol
from sparsecomp.transforms.base import SparsecompPass

ABI_ATTR = "sparse_iter.abi"
#: Marks a packed form this pass made (running it again leaves it alone).
PACKED_ATTR = "sparse_iter.packed"


def _return_type(func: ir.Operation) -> ir.Type | None:
    """The type ``func`` returns (from its ``llvm.return``), None for void."""
    for block in func.regions[0].blocks:
        for op in block.operations:
            if op.operation.name == "llvm.return" and len(op.operation.operands):
                return op.operation.operands[0].type
    return None


def _ref(symbol: str) -> str:
    """``@symbol`` as MLIR text: quoted where it is not a bare identifier (a function
    named ``@"row sums"``)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", symbol):
        return f"@{symbol}"
    return "@" + json.dumps(symbol)


def wrapper_text(symbol: str, params: list[ir.Type], result: ir.Type | None, loc: str) -> str:
    """The packed wrapper of ``symbol`` (and a declaration of it) as LLVM-dialect text,
    every op at location ``loc`` (``loc(...)`` text)."""
    types = ", ".join(map(str, params))
    ret = str(result) if result is not None else "!llvm.void"
    call_type = f"({types}) -> ({ret})" if result is not None else f"({types}) -> ()"
    head = f"llvm.func {_ref(packed_symbol(symbol))}(%args: !llvm.ptr {loc})"
    lines = [f"{head} attributes {{{PACKED_ATTR}}} {{"]
    values = []
    for i, ty in enumerate([*params, *([result] if result is not None else [])]):
        lines += [
            f"  %g{i} = llvm.getelementptr %args[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
            f"  %p{i} = llvm.load %g{i} : !llvm.ptr -> !llvm.ptr",
        ]
        if i < len(params):
            lines.append(f"  %v{i} = llvm.load %p{i} : !llvm.ptr -> {ty}")
            values.append(f"%v{i}")
    args = ", ".join(values)
    if result is None:
        lines.append(f"  llvm.call {_ref(symbol)}({args}) : {call_type}")
    else:
        lines.append(f"  %r = llvm.call {_ref(symbol)}({args}) : {call_type}")
        lines.append(f"  llvm.store %r, %p{len(params)} : {result}, !llvm.ptr")
    lines = [f"{line} {loc}" if line.startswith("  ") else line for line in lines]
    lines += [f"  llvm.return {loc}", f"}} {loc}"]
    declaration = f"llvm.func {_ref(symbol)}({types})" + (
        f" -> {ret}" if result is not None else ""
    )
    return "\n".join([declaration, *lines])


@dataclasses.dataclass(frozen=True)
class PackEntryPointsPass(SparsecompPass):
    """Give each C entry point a packed form: ``void _sparsecomp_packed_f(void **args)``.

    A public function with an ABI (``sparse_iter.abi``) is called through its
    ``_mlir_ciface_f`` wrapper, whose C parameters are a mix of pointers,
    integers and floating-point scalars: calling it needs a C prototype per
    signature, or libffi (ctypes). Its packed form, as MLIR's ExecutionEngine
    gives the functions it JIT-compiles, takes one array of pointers, one
    per parameter, each to where that parameter's value is; when the
    function returns a value, one more pointer says where to store it. The
    runtime's C call path (``sparsecomp.runtime._fastcall``) calls every
    function the same way through it.

    Runs on the LLVM dialect, after ``convert-func-to-llvm`` made the
    ``_mlir_ciface_`` wrappers; functions without an ABI (on the wrapper, or on
    the function it wraps: those the upstream sparsifier lowered) are left alone.

    The wrapper carries ``sparse_iter.packed``; another symbol of its name
    is an error.

    ```mlir
    llvm.func @_mlir_ciface_f(%a: !llvm.ptr, %n: i64) -> f32 attributes {sparse_iter.abi = "..."}
    // gains
    llvm.func @_sparsecomp_packed_f(%args: !llvm.ptr) attributes {sparse_iter.packed} {
      // %a = *args[0], %n = *args[1]
      %r = llvm.call @_mlir_ciface_f(%a, %n) : (!llvm.ptr, i64) -> f32
      // *args[2] = %r
    }
    ```
    """

    NAME = "sparse-iter-pack-entry-points"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        body = op.regions[0].blocks[0]
        existing: dict[str, ir.Operation] = {}
        entries = []
        for child in body.operations:
            child = child.operation
            if "sym_name" not in child.attributes:
                continue
            name = ir.StringAttr(child.attributes["sym_name"]).value
            existing[name] = child
        for name, child in existing.items():
            if child.name != "llvm.func" or not name.startswith(CIFACE):
                continue
            # the ABI is on the wrapper, or (functions the upstream sparsifier lowered)
            # on the function it wraps
            inner = existing.get(name.removeprefix(CIFACE))
            has_abi = ABI_ATTR in child.attributes or (
                inner is not None and ABI_ATTR in inner.attributes
            )
            if has_abi and len(child.regions[0].blocks):
                entries.append((name, child))
        for name, func in entries:
            other = existing.get(packed_symbol(name))
            if other is not None and PACKED_ATTR in other.attributes:
                continue  # packed already (the pass ran twice)
            if other is not None:
                other.location.emit_error(
                    f"sparse-iter-pack-entry-points: '@{packed_symbol(name)}' is the name of "
                    f"the packed form of '@{name}'; rename this symbol"
                )
                pass_.signal_pass_failure()
                return
            params = [arg.type for arg in func.regions[0].blocks[0].arguments]
            text = wrapper_text(name, params, _return_type(func), str(func.location))
            parsed = ir.Module.parse(text)  # [declaration of the callee, wrapper]
            wrapper = parsed.body.operations[1].operation.detach_from_parent()
            ir.InsertionPoint(body).insert(wrapper)
