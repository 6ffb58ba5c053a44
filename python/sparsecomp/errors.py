"""The exception family of the Python API.

Command-line tools never show these as tracebacks: they print the message,
which starts with ``file:line:col:`` when the error has a location.
"""

from __future__ import annotations


class SparsecompError(Exception):
    """Base class of every error sparsecomp raises on purpose."""

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None):
        self.message = message
        self.location = location
        self.hint = hint
        # what ``Exception.__init__`` would set, without calling it: Dynamo
        # (``torch.compile``) cannot trace that call, and an error raised in a
        # compiled model's forward would then read as Dynamo's own
        self.args = (self.render(),)

    def render(self) -> str:
        """``location: error: message`` plus the hint on a second line."""
        head = f"{self.location}: error: {self.message}" if self.location else self.message
        return f"{head}\n  hint: {self.hint}" if self.hint else head

    def for_tool(self, prog: str) -> str:
        """What command-line tool ``prog`` prints: a located error as it is, any other
        as ``prog: error: message`` (as ``mlir-opt`` does)."""
        text = self.render()
        return text if self.location else f"{prog}: error: {text}"


class ToolchainError(SparsecompError):
    """The MLIR/LLVM tools sparsecomp depends on are missing or failed."""


class PipelineError(SparsecompError):
    """A pass pipeline could not be parsed or failed while running."""


class CompileError(PipelineError):
    """A program failed to compile; the message lists the located diagnostics."""


class ParseError(CompileError):
    """The program's MLIR could not be parsed or is not valid; the message lists the
    parser's or verifier's located diagnostics."""


class FormatError(SparsecompError, ValueError):
    """A layout description or array data is invalid (host side, before any native call)."""


class TargetError(SparsecompError, ValueError):
    """A target description is invalid or names an unsupported device."""


class ArgumentError(SparsecompError, ValueError):
    """A call's arguments do not fit the function's signature (count, kind, dtype, rank,
    sizes that must agree, index widths); raised before any native code runs."""


class KernelError(SparsecompError, ValueError):
    """A check in compiled code failed while it ran (``sparsecomp.ir.fatal``: a reshape
    whose sizes do not multiply out to its source's, a shape that is not whole blocks
    of a BSR layout, a narrow index that overflowed...), on data only the call sees.
    The call raises it where a program run by ``mlir-runner`` prints the message and
    exits; what the kernel had allocated before the check is not freed."""

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None):
        text = message.strip()
        head, sep, rest = text.partition(": error: ")
        if sep and location is None and head.count(":") >= 2:  # file:line:col: error: ...
            location, text = head, rest
        super().__init__(text, location=location, hint=hint)


class ConversionWarning(UserWarning):
    """A call converted a sparse operand to the kernel's layout; reported once per
    function, argument and kind of operand (see :mod:`sparsecomp.runtime.conversions`)."""
