"""Errors compiled code reports at run time: a message on stderr, then exit status 1,
or, called from Python, an exception.

A check whose answer is only known at run time (a tensor's dynamic shape)
emits ``scf.if %bad { func.call @__sparsecomp_fatal_N(%size, ...) }``, and
``@__sparsecomp_fatal_N``, a private function of the module, writes its
message with the sizes formatted into it to stderr (``dprintf(2, ...)``) and
ends the program with ``exit(1)``, which flushes what it printed before. This
is how MLIR's own sparse runtime reports a fatal error (``MLIR_SPARSETENSOR_FATAL``:
``fprintf(stderr, ...)``, ``exit(1)``); it works the same under ``mlir-runner``
and in a ``kernel.so``. Only libc is called.

Before it prints, the function formats the message into a buffer and calls the
handler that ``@__sparsecomp_fatal_handler`` (a global of the library, null
until set) points at, if any: the Python runtime sets it when it loads a
library, and its handler returns to the call that ran the kernel, which raises
:class:`~sparsecomp.errors.KernelError` instead of ending the user's process
(``runtime/_fastcall.c``; what the kernel allocated before the check leaks).
A handler that returns (no guarded call on that thread) leaves the program to
print and exit as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, func, scf

PREFIX = "__sparsecomp_fatal_"
#: Where a host that can raise the error instead of exiting puts its handler (the
#: Python runtime: ``runtime/_fastcall.c``); null under mlir-runner.
HANDLER = "__sparsecomp_fatal_handler"
#: The message a handler gets is at most this long (with its NUL).
MESSAGE_BYTES = 1024
_DECLARATIONS = {
    "dprintf": "llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32",
    "snprintf": "llvm.func @snprintf(!llvm.ptr, i64, !llvm.ptr, ...) -> i32",
    "exit": "llvm.func @exit(i32)",
    HANDLER: (
        f"llvm.mlir.global external @{HANDLER}(#llvm.zero) {{addr_space = 0 : i32}} : !llvm.ptr"
    ),
}


def _c_string(text: str) -> tuple[str, int]:
    """``text`` + newline + NUL as an MLIR string literal body, and its length in bytes."""
    data = text.encode() + b"\n\0"
    body = "".join(
        chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\{b:02X}" for b in data
    )
    return body, len(data)


def _symbols(module: ir.Operation) -> set[str]:
    return {
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in module.regions[0].blocks[0].operations
        if "sym_name" in op.attributes
    }


def _define(module: ir.Operation, message: str, count: int) -> str:
    """A fresh private function of ``count`` index arguments that reports ``message``
    (each ``{}`` replaced by the next argument) and exits; its name."""
    taken = _symbols(module)
    n = 0
    while f"{PREFIX}{n}" in taken:
        n += 1
    name = f"{PREFIX}{n}"
    body, length = _c_string(message.replace("%", "%%").replace("{}", "%lld"))
    args = ", ".join(f"%a{i}: index" for i in range(count))
    casts = "".join(f"  %i{i} = arith.index_cast %a{i} : index to i64\n" for i in range(count))
    values = "".join(f", %i{i}" for i in range(count))
    types = "".join(", i64" for _ in range(count))
    call = f"llvm.call @dprintf(%fd, %fmt{values}) vararg(!llvm.func<i32 (i32, ptr, ...)>)"
    format_ = (
        f"llvm.call @snprintf(%buf, %n, %fmt{values}) "
        "vararg(!llvm.func<i32 (ptr, i64, ptr, ...)>)"
    )
    text = "\n".join(
        [
            *_DECLARATIONS.values(),
            f'llvm.mlir.global private constant @{name}_msg("{body}") {{addr_space = 0 : i32}}'
            f" : !llvm.array<{length} x i8>",
            f"func.func private @{name}({args}) {{",
            f"  %fmt = llvm.mlir.addressof @{name}_msg : !llvm.ptr",
            "  %fd = llvm.mlir.constant(2 : i32) : i32",
            casts.rstrip("\n"),
            f"  %at = llvm.mlir.addressof @{HANDLER} : !llvm.ptr",
            "  %handler = llvm.load %at : !llvm.ptr -> !llvm.ptr",
            "  %none = llvm.mlir.zero : !llvm.ptr",
            '  %set = llvm.icmp "ne" %handler, %none : !llvm.ptr',
            "  scf.if %set {",
            f"    %n = llvm.mlir.constant({MESSAGE_BYTES} : i64) : i64",
            "    %buf = llvm.alloca %n x i8 : (i64) -> !llvm.ptr",
            f"    %f = {format_} : (!llvm.ptr, i64, !llvm.ptr{types}) -> i32",
            "    llvm.call %handler(%buf) : !llvm.ptr, (!llvm.ptr) -> ()",
            "  }",
            f"  %w = {call} : (i32, !llvm.ptr{types}) -> i32",
            "  %one = llvm.mlir.constant(1 : i32) : i32",
            "  llvm.call @exit(%one) : (i32) -> ()",
            "  return",
            "}",
        ]
    )
    parsed = ir.Module.parse(text, module.context)
    first = module.regions[0].blocks[0].operations[0]  # the caller's function at least
    for op in list(parsed.body.operations):
        if ir.StringAttr(op.attributes["sym_name"]).value not in taken:  # libc's, once
            op.move_before(first)
    return name


def where(loc: ir.Location) -> str:
    """``file:line:col: `` of ``loc``, or "" where it is no file location."""
    return f"{loc.filename}:{loc.start_line}:{loc.start_col}: " if loc.is_a_file() else ""


def fail_if(bad: ir.Value, message: str, sizes: Sequence[ir.Value], module: ir.Operation) -> None:
    """At the current insertion point and location: if ``bad`` (i1), report
    ``message`` with ``sizes`` (index values) in its ``{}`` and exit."""
    name = _define(module, message, len(sizes))
    branch = scf.IfOp(bad)
    with ir.InsertionPoint(branch.then_block):
        func.CallOp([], ir.FlatSymbolRefAttr.get(name), list(sizes))
        scf.YieldOp([])


def any_not_whole(pairs: Sequence[tuple[ir.Value, int]]) -> ir.Value:
    """i1: whether some ``size`` of ``(size, block)`` is not a multiple of ``block``."""
    index = ir.IndexType.get()
    zero = arith.ConstantOp(index, 0).result
    bad: ir.Value | None = None
    for size, block in pairs:
        rem = arith.RemUIOp(size, arith.ConstantOp(index, block).result).result
        this = arith.CmpIOp(arith.CmpIPredicate.ne, rem, zero).result
        bad = this if bad is None else arith.OrIOp(bad, this).result
    return bad if bad is not None else arith.ConstantOp(ir.IntegerType.get_signless(1), 0).result


def only_returned(value: ir.Value) -> bool:
    """Whether every use of ``value`` returns it from a public function: a result that
    reaches its caller as it is, which the runtime checks for a Python caller, and
    a caller in the program checks where its call returns (``func.call`` results)."""
    uses = list(value.uses)
    if not uses:
        return False
    for use in uses:
        owner = use.owner
        if owner.name != "func.return":
            return False
        func = owner.parent
        while func is not None and func.name != "func.func":
            func = func.parent
        if func is None or "sym_visibility" in func.attributes:
            return False  # a private function's caller reads it unchecked
    return True
