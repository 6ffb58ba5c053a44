"""``sparsecomp-compile``: compile an MLIR file to a kernel directory.

    sparsecomp-compile in.mlir --target host -o out/

``out/`` then holds ``kernel.so``, ``manifest.json``, the runtime libraries it
needs and the IR of every stage; ``sparsecomp.load("out/")`` runs it without
MLIR installed. ``--target cuda-emu:sm_80`` builds the CUDA schedule run on
this CPU; ``--target cuda:sm_90`` writes each GPU kernel's PTX
(``<kernel>.ptx``) and, where ``ptxas`` is installed, its cubin. Errors print
as ``file:line:col: error: ...`` (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

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
        help="'host' (default), #sparse_iter.cpu<...> text, cuda-emu:sm_XX or cuda:sm_XX (PTX)",
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
        if args.target.startswith("cuda:"):
            return _write_ptx(args.input, args.target, Path(args.output))
        from sparsecomp.compiler.driver import compile as compile_mlir

        exe = compile_mlir(
            args.input, args.target, cache_results=not args.no_cache, verbose=args.verbose,
            **options,
        )  # fmt: skip
        exe.save(args.output)
    except SparsecompError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"wrote {args.output}: {', '.join(exe.functions)}")
    return 0


def _write_ptx(source: str, target: str, out: Path) -> int:
    from sparsecomp.compiler import cuda

    kernels = cuda.ptx(Path(source), target)
    out.mkdir(parents=True, exist_ok=True)
    chip = cuda.parse_target(target).chip
    written = []
    for name, text in kernels.items():
        (out / f"{name}.ptx").write_text(text)
        written.append(f"{name}.ptx")
        if cuda.ptxas() is not None:
            (out / f"{name}.cubin").write_bytes(cuda.assemble(text, chip))
            written.append(f"{name}.cubin")
    print(f"wrote {out}: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
