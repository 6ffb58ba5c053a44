"""``sparsecomp-opt``: an mlir-opt for programs with sparse_iter encodings.

Reads MLIR from a file or stdin, runs a pass pipeline mixing upstream and
sparsecomp passes, and prints the result::

    sparsecomp-opt in.mlir --pass-pipeline='builtin.module(sparse-iter-fold-encodings, cse)'
    sparsecomp-opt in.mlir --sparse-iter-fold-encodings='max-iterations=3' --canonicalize
    sparsecomp-opt --split-input-file --verify-diagnostics test-invalid.mlir

Errors are printed as ``file:line:col: error: message`` with exit code 1;
bad input never produces a Python traceback.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import DiagnosticLog, parse_module
from sparsecomp.ir.verify import verify
from sparsecomp.tools import listing
from sparsecomp.tools.diagnostics import (
    Diagnostic,
    check,
    format_diagnostic,
    parse_expectations,
)
from sparsecomp.tools.pipes import run_tool
from sparsecomp.transforms.pipeline import build_pass_manager

PROG = "sparsecomp-opt"
DEFAULT_SPLIT = "// -----"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:
        raise SparsecompError(f"{message} (see {PROG} --help)")


class _SplitAction(argparse.Action):
    """``--split-input-file`` alone, or ``--split-input-file=MARKER``."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, DEFAULT_SPLIT)


def build_parser() -> argparse.ArgumentParser:
    p = _ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        epilog="Any other --<pass-name>[=<options>] flag adds that pass, in order.",
    )
    p.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file ('-' for stdout)")
    p.add_argument("--pass-pipeline", help="textual pipeline, e.g. 'builtin.module(cse)'")
    p.add_argument(
        "--split-input-file",
        nargs=0,
        action=_SplitAction,
        default=None,
        help=f"process chunks separated by '{DEFAULT_SPLIT}' (or by MARKER, given as"
        " --split-input-file=MARKER)",
    )
    p.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check diagnostics against expected-* annotations in the input",
    )
    p.add_argument(
        "--mlir-print-ir-after-all",
        action="store_true",
        help="print the IR after every pass (to stderr)",
    )
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print generic op form")
    p.add_argument(
        "--print-python",
        action="store_true",
        help="print the result as Python in the kernel subset (sparsecomp.script; stage I)",
    )
    p.add_argument("--list-passes", action="store_true", help="list passes and pipelines")
    p.add_argument(
        "--list-upstream-passes",
        action="store_true",
        help="list MLIR's own passes and pipelines (usable in --pass-pipeline)",
    )
    p.add_argument("--show-dialects", action="store_true", help="list the available dialects")
    return p


@dataclass
class Options:
    """What to do with each chunk: the pipeline and how to print."""

    pipeline: str
    filename: str
    verify_diagnostics: bool = False
    print_ir_after_all: bool = False
    debuginfo: bool = False
    generic: bool = False
    python: bool = False


def split_pass_flags(
    argv: Sequence[str], parser: argparse.ArgumentParser
) -> tuple[list[str], list[str], str | None]:
    """Separate ``--<pass>[=<options>]`` flags from the tool's own arguments.

    Done before argparse, which would take a flag value containing a space
    (``--x='a=1 b=2'``) for a positional argument. Also returns the marker of
    ``--split-input-file=MARKER``, if given.
    """
    own = {o for a in parser._actions for o in a.option_strings}
    tool_args, pass_flags, marker = [], [], None
    for arg in argv:
        name, has_value, value = arg.partition("=")
        if name == "--split-input-file" and has_value:
            marker = value.strip() or DEFAULT_SPLIT  # an empty one, as mlir-opt: the default
            tool_args.append(name)
        elif arg.startswith("--") and len(arg) > 2 and name not in own:
            pass_flags.append(arg)
        else:
            tool_args.append(arg)
    return tool_args, pass_flags, marker


def flags_to_pipeline(flags: Sequence[str]) -> str:
    """``['--cse', '--x=a=1 b=2']`` -> ``'cse, x{a=1 b=2}'``."""
    elements = []
    for flag in flags:
        if not flag.startswith("-") or flag in ("-", "--"):
            raise SparsecompError(f"unexpected argument '{flag}'")
        name, _, opts = flag.lstrip("-").partition("=")
        elements.append(f"{name}{{{opts}}}" if opts else name)
    return ", ".join(elements)


def split_chunks(text: str, marker: str | None) -> list[str]:
    """Chunks of ``text``, each padded with newlines to keep its line numbers."""
    if marker is None:
        return [text]
    chunks: list[str] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.split("\n")):
        if line.strip() == marker:
            chunks.append("\n" * start + "\n".join(current))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append("\n" * start + "\n".join(current))
    return chunks


def run_chunk(text: str, opts: Options) -> tuple[str | None, list[Diagnostic]]:
    """Parse, verify and transform one chunk; (printed module or None, diagnostics)."""
    # IR printing aborts the process unless multithreading is off.
    ctx = make_context(multithreading=not opts.print_ir_after_all)
    log = DiagnosticLog(opts.filename)
    try:
        with log.capture(ctx), ctx:
            module = parse_module(text, opts.filename, ctx).operation
            if not verify(module):
                return None, log.diagnostics
            pm = build_pass_manager(opts.pipeline, ctx)
            if opts.print_ir_after_all:
                pm.enable_ir_printing(print_after_all=True, print_module_scope=True)
            pm.run(module)
            if opts.python:
                try:
                    return _python(module), log.diagnostics
                except SparsecompError as exc:  # what the subset cannot say: this chunk fails
                    print(exc.for_tool(PROG), file=sys.stderr)
                    return None, log.diagnostics
            asm = module.get_asm(
                enable_debug_info=opts.debuginfo, print_generic_op_form=opts.generic
            )
    except ir.MLIRError:
        return None, log.diagnostics
    return (None if log.has_errors else asm), log.diagnostics


def _python(module: ir.Operation) -> str:
    """``module`` as Python (:func:`sparsecomp.script.printer.to_python`); what it
    cannot print is an error naming the op."""
    from sparsecomp.script.printer import to_python

    return to_python(module.opview)


def process(text: str, opts: Options, marker: str | None) -> tuple[list[str], bool]:
    """Outputs of every chunk and whether all went well; reports diagnostics."""
    outputs, ok = [], True
    for chunk in split_chunks(text, marker):
        asm, diagnostics = run_chunk(chunk, opts)
        if opts.verify_diagnostics:
            expected, malformed = parse_expectations(chunk, opts.filename)
            problems = malformed + check(expected, diagnostics, opts.filename)
        else:
            problems = diagnostics
            ok &= asm is not None
        for d in problems:
            print(format_diagnostic(d), file=sys.stderr)
        ok &= not any(d.severity == "error" for d in problems)
        if asm is not None:
            outputs.append(asm)
    return outputs, ok


def _read(path: str) -> str:
    if path == "-":
        raw = getattr(sys.stdin, "buffer", None)  # None: a text stream (a test's StringIO)
        try:
            return sys.stdin.read() if raw is None else raw.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SparsecompError(f"cannot read standard input: {exc}") from None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SparsecompError(f"cannot read input file '{path}': {reason}") from None


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise SparsecompError(f"cannot write output file '{path}': {exc.strerror}") from None


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    tool_args, extra, marker = split_pass_flags(sys.argv[1:] if argv is None else argv, parser)
    args = parser.parse_args(tool_args)
    if marker is not None:
        args.split_input_file = marker
    if args.list_passes:
        print(listing.list_passes())
        return 0
    if args.list_upstream_passes:
        print(listing.list_upstream_passes())
        return 0
    if args.show_dialects:
        print(listing.show_dialects())
        return 0
    if args.pass_pipeline and extra:
        raise SparsecompError("use either --pass-pipeline or per-pass flags, not both")
    pipeline = args.pass_pipeline or flags_to_pipeline(extra)
    build_pass_manager(pipeline, make_context())  # report pipeline errors once, up front
    filename = "<stdin>" if args.input == "-" else args.input
    opts = Options(
        pipeline,
        filename,
        args.verify_diagnostics,
        args.mlir_print_ir_after_all,
        args.mlir_print_debuginfo,
        args.mlir_print_op_generic,
        args.print_python,
    )
    outputs, ok = process(_read(args.input), opts, args.split_input_file)
    separator = f"\n{args.split_input_file or DEFAULT_SPLIT}\n"
    _write(args.output, separator.join(outputs))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 success, 1 error, 141 when the reader of
    standard output went away early, as with ``| head``)."""
    return run_tool(lambda: _checked(argv))


def _checked(argv: Sequence[str] | None) -> int:
    try:
        return _main(argv)
    except SparsecompError as exc:
        print(exc.for_tool(PROG), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # argparse's --help
        return exc.code if isinstance(exc.code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
