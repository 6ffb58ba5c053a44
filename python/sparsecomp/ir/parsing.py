"""Parse MLIR text into a module with file locations, as mlir-opt does.

``ir.Module.parse`` wraps top-level ops in an implicit module like mlir-opt,
but names every buffer ``"-"`` (``ir.Operation.parse`` takes a name but no
implicit module, and wrapping the text would move attribute aliases out of
the top level). So the module is parsed as ``"-"`` and the buffer name is
replaced afterwards: in op and block-argument locations by
:func:`rename_buffer`, in diagnostics by :func:`convert`.

Diagnostics come back as :class:`sparsecomp.tools.diagnostics.Diagnostic`
records, whatever produced them (parser, verifier, pass).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mlir import ir

from sparsecomp.tools.diagnostics import Diagnostic

_SEVERITY = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}
_OP_NOTE = "see current operation:"


def _file_location(loc: ir.Location) -> tuple[str, int, int]:
    """``(file, line, col)`` of the first file location inside ``loc``."""
    if loc.is_a_file():
        return loc.filename, loc.start_line, loc.start_col
    if loc.is_a_name() or loc.is_a_callsite():
        inner = loc.child_loc if loc.is_a_name() else loc.callee
        return _file_location(inner)
    if loc.is_a_fused():
        for part in loc.locations:
            found = _file_location(part)
            if found[1]:
                return found
    return "", 0, 0


def location_text(loc: ir.Location, filename: str) -> str:
    """``file:line:col`` of ``loc`` (buffer ``"-"`` as ``filename``), or ``filename``."""
    file, line, col = _file_location(loc)
    file = filename if file in ("-", "") else file
    return f"{file}:{line}:{col}" if line else file


def convert(diag, filename: str) -> list[Diagnostic]:
    """A diagnostic and its notes as records; buffer ``"-"`` becomes ``filename``."""
    file, line, col = _file_location(diag.location)
    out = [
        Diagnostic(
            _SEVERITY[diag.severity],
            filename if file in ("-", "") else file,
            line,
            col,
            diag.message,
        )
    ]
    for note in diag.notes:
        if not note.message.startswith(_OP_NOTE):
            out += convert(note, filename)
    return out


class DiagnosticLog:
    """Collects every diagnostic of a context while active (``with log.capture(ctx)``)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.diagnostics: list[Diagnostic] = []

    def _handler(self, diag) -> bool:
        self.diagnostics += convert(diag, self.filename)
        return True

    @contextlib.contextmanager
    def capture(self, ctx: ir.Context) -> Iterator[DiagnosticLog]:
        handler = ctx.attach_diagnostic_handler(self._handler)
        try:
            yield self
        except ir.MLIRError as exc:
            for diag in exc.error_diagnostics:
                self.diagnostics += convert(diag, self.filename)
            raise
        finally:
            handler.detach()

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)


def _renamed(loc: ir.Location, filename: str) -> ir.Location | None:
    if loc.is_a_file() and loc.filename == "-":
        name = printable_name(filename)
        return ir.Location.file(name, loc.start_line, loc.start_col, context=loc.context)
    return None


def printable_name(filename: str) -> str:
    """``filename`` as text MLIR can hold: a path that is not UTF-8 (its bytes escaped
    by Python as surrogates) gets ``\\xNN`` for each such byte."""
    try:
        filename.encode("utf-8")
        return filename
    except UnicodeEncodeError:
        raw = filename.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "backslashreplace")


def rename_buffer(module: ir.Module, filename: str) -> None:
    """Replace the parser's buffer name ``"-"`` by ``filename`` in every location."""

    def visit(op: ir.Operation) -> ir.WalkResult:
        if (loc := _renamed(op.location, filename)) is not None:
            op.location = loc
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if (loc := _renamed(arg.location, filename)) is not None:
                        arg.set_location(loc)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)


def parse_module(text: str, filename: str, ctx: ir.Context) -> ir.Module:
    """Parse ``text`` as a module (implicit if needed) with locations in ``filename``.

    Raises ``ir.MLIRError`` carrying located diagnostics.
    """
    with ctx:
        module = ir.Module.parse(text)
    rename_buffer(module, filename)
    return module
