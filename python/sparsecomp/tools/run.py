"""``sparsecomp-run``: compile an MLIR file and run one function, like ``mlir-runner``.

    sparsecomp-run in.mlir -e main

The function takes no arguments; what it prints (``vector.print``,
``printMemrefF32``...) goes to standard output. Functions that return values
have them printed by Python. Compilation errors print as
``file:line:col: error: ...`` (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sparsecomp.errors import SparsecompError
from sparsecomp.tools.pipes import run_tool, source_of


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="sparsecomp-run", description="Compile an MLIR file and run one function."
    )
    parser.add_argument("input", help="the .mlir file ('-' for standard input)")
    parser.add_argument("-e", "--entry", default="main", help="function to run (default main)")
    parser.add_argument("--target", default="host", help="'host' or #sparse_iter.cpu<...> text")
    args = parser.parse_args(argv)
    try:
        from sparsecomp.compiler.driver import compile as compile_mlir

        exe = compile_mlir(source_of(args.input), args.target)
        if args.entry not in exe.functions:
            names = list(exe.functions)
            known = ", ".join(names[:20]) or "none"
            if len(names) > 20:
                known += f" and {len(names) - 20} more"
            why = exe.functions.uncallable.get(args.entry)
            note = f"; it is not callable from Python: {why}" if why else ""
            raise SparsecompError(
                f"no public function '{args.entry}' (public functions: {known}){note}"
            )
        sys.stdout.flush()
        result = exe.functions[args.entry]()
    except SparsecompError as exc:
        print(exc.for_tool("sparsecomp-run"), file=sys.stderr)
        return 1
    if result is not None:
        print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
