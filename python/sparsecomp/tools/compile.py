"""``sparsecomp-compile``: compile an MLIR file to a kernel directory.

    sparsecomp-compile in.mlir --target host -o out/

``out/`` then holds ``kernel.so``, ``manifest.json``, the runtime libraries it
needs and the IR of every stage; ``sparsecomp.load("out/")`` runs it without
MLIR installed. ``--target cuda-emu:sm_80`` builds the CUDA schedule run on
this CPU; ``--target cuda:sm_90`` builds it for the GPU: the directory also
holds each kernel's PTX (``<kernel>.ptx``) and, where ``ptxas`` is
installed, its cubin, and runs where ``cuda-bindings`` finds a driver.
Errors print as ``file:line:col: error: ...`` (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sparsecomp.errors import SparsecompError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparsecomp-compile", description="Compile an MLIR file to a kernel directory."
    )
    parser.add_argument("input", help="the .mlir file")
    parser.add_argument("-o", "--output", required=True, help="directory to write")
    parser.add_argument(
        "--target",
        default="host",
        help="'host' (default), #sparse_iter.cpu<...> text, cuda-emu:sm_XX or cuda:sm_XX",
    )
    parser.add_argument("--vector-bits", type=int, help="vector width (0: scalar code)")
    parser.add_argument("--unroll", type=int, help="vectors in flight per loop iteration")
    parser.add_argument(
        "--panel-bytes", type=int, help="cache budget of column panels of a gathered operand"
    )
    parser.add_argument("--no-cache", action="store_true", help="ignore the compile cache")
    parser.add_argument("-v", "--verbose", action="store_true", help="print stage timings")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = ("vector_bits", "unroll", "panel_bytes")
    given = {name: getattr(args, name) for name in names}
    options = {k: v for k, v in given.items() if v is not None}
    try:
        from sparsecomp.compiler.driver import compile as compile_mlir

        exe = compile_mlir(
            args.input, args.target, cache_results=not args.no_cache, verbose=args.verbose,
            **options,
        )  # fmt: skip
        exe.save(args.output)
    except SparsecompError as exc:
        print(exc, file=sys.stderr)
        return 1
    kernels = [k["ptx"] for k in exe.manifest.get("kernels", [])]
    kernels += [k["cubin"] for k in exe.manifest.get("kernels", []) if k["cubin"]]
    print(f"wrote {args.output}: {', '.join([*exe.functions, *kernels])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
