"""Pass ``sparse-iter-lower-upstream``."""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.calls import functions
from sparsecomp.ir.context import emit_remark
from sparsecomp.ir.targets import function_target
from sparsecomp.ir.walk import preorder
from sparsecomp.lowering.abi import uncallable
from sparsecomp.options import vector_bits_error
from sparsecomp.targets import CpuTarget
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.import_sparse_tensor import UPSTREAM_ATTR
from sparsecomp.transforms.wrap_upstream import UNCALLABLE_ATTR

#: Attribute on the lowered entry points: their ABI (JSON), read by the driver.
ABI_ATTR = "sparse_iter.abi"


def _symbol(op: ir.Operation) -> str | None:
    return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None


def _is_declaration(op: ir.Operation) -> bool:
    return op.name == "llvm.func" and not op.regions[0].blocks


def splice(lowered: ir.Module, into: ir.Module) -> None:
    """Move the top-level ops of ``lowered`` (LLVM dialect) into ``into``.

    Declarations ``into`` already has are dropped; a definition replaces a
    declaration of the same name; private definitions whose names clash
    (string constants, helper functions) are renamed first.
    """
    table = ir.SymbolTable(into.operation)
    incoming = ir.SymbolTable(lowered.operation)
    ops = [op.operation for op in lowered.body.operations]
    for op in ops:
        name = _symbol(op)
        if name is None or name not in table or _is_declaration(op):
            continue
        existing = table[name].operation
        if _is_declaration(existing):
            table.erase(existing)
            continue
        fresh, n = f"{name}_upstream", 0
        while fresh in table or fresh in incoming:
            n += 1
            fresh = f"{name}_upstream{n}"
        ir.SymbolTable.replace_all_symbol_uses(name, fresh, lowered.operation)
        ir.SymbolTable.set_symbol_name(op, fresh)
    for op in ops:
        name = _symbol(op)
        if name is not None and name in table and _is_declaration(op):
            continue
        op.detach_from_parent()
        into.body.append(op)
        if name is not None:
            table.insert(op)


@dataclasses.dataclass(frozen=True)
class LowerUpstreamPass(SparsecompPass):
    """Lower the functions marked for the upstream sparsifier to the LLVM dialect.

    Runs right after stage I. Functions that ``sparse-iter-mark-upstream``
    marked ``sparse_iter.upstream`` (``#sparse_tensor`` types) leave the
    module, go through MLIR's ``sparsifier`` pass list (with
    ``sparse-iter-widen-bool-buffers`` and ``sparse-iter-wrap-upstream``
    where the storage is explicit, and OpenMP when the target has several
    threads; see :func:`sparsecomp.compiler.upstream.pipeline`) in a worker
    subprocess, and come back as ``llvm.func`` ops, which the later stages
    leave alone. An assertion in an upstream pass kills the worker, not the
    caller: it becomes an error at the marked function, unless a second
    try with loops left sequential, or a last one with every op on sparse
    tensors computed dense, succeeds (a remark at the first marked function
    says so). Public functions
    get sparsecomp's buffer ABI (``_mlir_ciface_<name>``) and carry it in
    ``sparse_iter.abi``, as stage III gives it to the others. Declarations
    both halves share are merged; clashing private symbols are renamed.

    This is the one road to the sparsifier: ``sparsecomp.compile`` runs it
    as its ``upstream`` stage and ``sparsecomp-cpu`` includes it, so
    ``sparsecomp-opt --pass-pipeline='builtin.module(sparsecomp-cpu)'``
    lowers every program ``sparsecomp.compile`` accepts. Modules without
    marked functions are left unchanged.

    ``vector-bits``: -1 for the target's width, 0 for scalar code.

    Before:

    ```mlir
    func.func @main() attributes {sparse_iter.upstream = "it uses 'sparse_tensor.convert'"} {
      %s = sparse_tensor.convert %d : tensor<4x3xf64> to tensor<4x3xf64, #CSR>
      ...
    }
    ```

    After:

    ```mlir
    llvm.func @main() attributes {llvm.emit_c_interface, sparse_iter.abi = "..."} {
      ...
    }
    llvm.func @_mlir_ciface_main() attributes {llvm.emit_c_interface} { ... }
    ```
    """

    NAME = "sparse-iter-lower-upstream"
    vector_bits: int = -1

    def __post_init__(self) -> None:
        if (why := vector_bits_error(self.vector_bits)) is not None:
            raise ValueError(f"vector-bits {why}")

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        from sparsecomp.compiler import upstream, upstream_worker

        marked = [f for f in functions(op) if UPSTREAM_ATTR in f.attributes]
        if not marked:
            return
        target = function_target(marked[0])
        if not isinstance(target, CpuTarget):
            what = f"the upstream sparsifier compiles for CPU targets, not {target}"
            marked[0].location.emit_error(what)
            pass_.signal_pass_failure()
            return
        refused = [
            inner
            for func in marked
            for inner in preorder(func)
            if inner.name == "tensor.extract"
            and ir.RankedTensorType(inner.operands[0].type).encoding is not None
        ]
        for inner in refused:  # the sparsifier failed on it with a type-conversion error
            inner.location.emit_error(
                "'tensor.extract' on a sparse tensor is not supported by MLIR's sparsifier, "
                "which compiles this function; read its entries with a linalg.generic or "
                "sparse_tensor.foreach"
            )
        if refused:
            pass_.signal_pass_failure()
            return
        try:
            part = upstream.split(op)
        except SparsecompError as exc:
            marked[0].location.emit_error(exc.message)
            pass_.signal_pass_failure()
            return
        assert part is not None
        filename = _filename(marked[0])
        with tempfile.TemporaryDirectory(prefix="sparsecomp-upstream-") as tmp:
            out = Path(tmp)
            (out / upstream.INPUT).write_text(part.module.operation.get_asm(enable_debug_info=True))
            done = upstream_worker.run(out, filename, upstream.pipeline(target, self.vector_bits))
            text = (out / upstream.OUTPUT).read_text() if done.ok else ""
        if not done.ok:
            what = "the upstream sparsifier failed"
            if done.crash:
                what = f"the upstream sparsifier crashed ({done.crash})"
            _report(marked, part.marked, what, done.diagnostics)
            pass_.signal_pass_failure()
            return
        if done.densified:
            names = ", ".join(f"'{n}'" for n in part.marked)
            emit_remark(
                marked[0].location,
                f"the upstream sparsifier could not compile {names} as written "
                f"({done.densified}); compiled with its ops on sparse tensors computed dense "
                "(sparse inputs converted to dense, sparse results converted back)",
            )
        lowered = ir.Module.parse(text, op.context)
        for entry in lowered.body.operations:
            name = _symbol(entry.operation)
            if name in part.functions:
                abi = json.dumps(part.functions[name]["abi"])
                attrs = entry.operation.attributes
                if UNCALLABLE_ATTR in attrs:  # left unwrapped by sparse-iter-wrap-upstream
                    abi = uncallable(ir.StringAttr(attrs[UNCALLABLE_ATTR]).value)
                attrs[ABI_ATTR] = ir.StringAttr.get(abi, op.context)
        splice(lowered, _ModuleView(op))


#: What MLIR's sparse codegen says when an op on a sparse tensor has no rewrite.
_UNLOWERED = "failed to legalize unresolved materialization"
_UNLOWERED_NOTE = (
    "note: the sparsifier's error below means that it has no rewrite for an op on a sparse "
    "tensor (the 'live user' it names; e.g. tensor.concat of sparse tensors, a slice of a "
    "tensor without a slice encoding, i1 values): compute that op on a dense copy "
    "(sparse_iter.unset_encoding, or sparse_tensor.convert to a tensor without encoding)"
)
_DIAGNOSTIC = re.compile(r"^(.*?):(\d+):(\d+): (error|warning|note|remark): (.*)$", re.S)


def _report(
    funcs: list[ir.Operation], why: dict[str, tuple[str | None, str]], what: str, said: list[str]
) -> None:
    """One error at the first marked function, then the worker's diagnostics at theirs.

    A note the worker printed is appended to the error before it (the
    bindings can only emit errors).
    """
    names = ", ".join(f"'{n}'" for n in why)
    reasons = [f"note: '{n}' went to the upstream sparsifier: it {r}" for n, (_, r) in why.items()]
    if any(_UNLOWERED in line for line in said):
        reasons.append(_UNLOWERED_NOTE)
    errors: list[tuple[ir.Location, str]] = [
        (funcs[0].location, "\n".join([f"{what} compiling {names}", *reasons]))
    ]
    for line in said:
        found = _DIAGNOSTIC.match(line)
        if found is None:
            errors.append((funcs[0].location, line))
            continue
        file, row, col, severity, message = found.groups()
        if severity == "note":
            loc, text = errors[-1]
            errors[-1] = (loc, f"{text}\n{line}")
            continue
        errors.append((ir.Location.file(file, int(row), int(col), funcs[0].context), message))
    for loc, text in errors:
        loc.emit_error(text)


def _filename(func: ir.Operation) -> str:
    loc = func.location
    return loc.filename if loc.is_a_file() else "<source>"


class _ModuleView:
    """The ``body``/``operation`` of a module op, as :func:`splice` reads an ``ir.Module``."""

    def __init__(self, op: ir.Operation) -> None:
        self.operation = op
        self.body = op.regions[0].blocks[0]
