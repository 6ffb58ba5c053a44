"""``sparsecomp-compile``: compile an MLIR file to a kernel directory.

    sparsecomp-compile in.mlir --target host -o out/

``out/`` then holds ``kernel.so``, ``manifest.json``, the runtime libraries it
needs and the IR of every stage; ``sparsecomp.load("out/")`` runs it without
MLIR installed. ``--target cuda-emu:sm_80`` builds the CUDA schedule run on
this CPU; ``--target cuda:sm_90`` builds it for the GPU: the directory also
holds each kernel's PTX (``<kernel>.ptx``) and, where ``ptxas`` is
installed, its cubin, and runs where ``cuda-bindings`` finds a driver. A
module that names a CPU and a CUDA target in its ``sparse_iter.targets`` is
built in parts, one per device (``part-N/`` beside the CPU's); ``--target
cuda-emu`` emulates its GPU parts (docs/multi-device.md).
``--explain A.mtx`` chooses the layout of each function's sparse matrix
argument for that matrix as ``exe.prepare`` does (the cost model's
shortlist timed on a sample, :mod:`sparsecomp.runtime.tournament`), prints the
choice and why, and compiles the functions with it (a
``sparse_iter.decompose`` rule on the argument).
Errors print as ``file:line:col: error: ...`` (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparsecomp import knobs
from sparsecomp.compiler import cache, daemon, server
from sparsecomp.errors import SparsecompError
from sparsecomp.options import check as check_options
from sparsecomp.targets import detect_host
from sparsecomp.tools.pipes import run_tool, source_of


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparsecomp-compile", description="Compile an MLIR file to a kernel directory."
    )
    parser.add_argument("input", help="the .mlir file ('-' for standard input)")
    parser.add_argument("-o", "--output", required=True, help="directory to write")
    parser.add_argument(
        "--target",
        default="host",
        help="'host' (default), #sparse_iter.cpu<...> text, cuda-emu:sm_XX or cuda:sm_XX; "
        "cuda-emu: a module's own CUDA targets emulated",
    )
    parser.add_argument("--vector-bits", type=int, help="vector width (0: scalar code)")
    parser.add_argument("--unroll", type=int, help="vectors in flight per loop iteration")
    parser.add_argument(
        "--panel-bytes", type=int, help="cache budget of column panels of a gathered operand"
    )
    parser.add_argument(
        "--slice-bytes", type=int, help="cache budget of slices of a gathered operand's rows"
    )
    parser.add_argument(
        "--explain",
        metavar="MATRIX",
        help="choose the layout of each function's sparse matrix argument for this matrix "
        "(.mtx or .npz), compile with it and print the choice and why",
    )
    parser.add_argument(
        "--k", type=int, default=64, help="dense columns assumed by --explain (default 64)"
    )
    parser.add_argument("--no-cache", action="store_true", help="ignore the compile cache")
    parser.add_argument("-v", "--verbose", action="store_true", help="print stage timings")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    names = ("vector_bits", "unroll", "panel_bytes", "slice_bytes")
    given = {name: getattr(args, name) for name in names}
    options = {k: v for k, v in given.items() if v is not None}
    try:
        check_options(options, flags=True)
    except SparsecompError as exc:
        print(exc.for_tool("sparsecomp-compile"), file=sys.stderr)
        return 1
    if knobs.compile_daemon() and not knobs.compile_in_process() and not _prefetched(args, options):
        daemon.connect_early()  # it starts while the driver imports (a cold compile)
    try:
        return _compiled(args, options)
    finally:
        daemon.forget_early()
        server.forget_prefetch()


def _prefetched(args: argparse.Namespace, options: dict[str, Any]) -> bool:
    """Whether the build of a ``--target host`` file was sent to the daemon before the
    driver's import (:func:`.server.prefetch`), or is not needed (the cache holds it).
    The driver makes the same job and takes the answer; false (nothing sent) for other
    targets, standard input and a file this cannot read, which the driver reports."""
    if args.target != "host" or args.input == "-":
        return False
    try:
        text = Path(args.input).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if not text.strip():
        return False
    try:
        cpu = detect_host()
    except SparsecompError:  # the driver says so
        return False
    if not args.no_cache and cache.lookup(cache.cache_key(text, cpu.attr_text(), options)):
        return True
    progress = server.print_progress if args.verbose else None
    server.prefetch(text, str(Path(args.input)), cpu, options, progress)
    return True


def _compiled(args: argparse.Namespace, options: dict[str, Any]) -> int:
    try:
        from sparsecomp.compiler.driver import compile as compile_mlir

        source = source_of(args.input)
        exe = compile_mlir(
            source, args.target, cache_results=not args.no_cache, verbose=args.verbose,
            **options,
        )  # fmt: skip
        if args.explain is not None:
            exe = _explained(exe, args, options, source)
        exe.save(args.output)
    except SparsecompError as exc:
        print(exc.for_tool("sparsecomp-compile"), file=sys.stderr)
        return 1
    for remark in exe.remarks:  # as a compiler prints its remarks
        print(remark, file=sys.stderr)
    kernels = [k["ptx"] for k in exe.manifest.get("kernels", [])]
    kernels += [k["cubin"] for k in exe.manifest.get("kernels", []) if k["cubin"]]
    print(f"wrote {args.output}: {', '.join([*exe.functions, *kernels])}")
    return 0


def read_matrix(path: str) -> Any:
    """A scipy.sparse matrix from a Matrix Market (``.mtx``, ``.mtx.gz``) or ``.npz`` file."""
    import scipy.io  # type: ignore[import-untyped]
    import scipy.sparse as sp  # type: ignore[import-untyped]

    try:
        if path.endswith(".npz"):
            return sp.load_npz(path).tocsr()
        return sp.csr_matrix(scipy.io.mmread(path))
    except (OSError, ValueError) as exc:
        raise SparsecompError(f"cannot read the matrix {path}: {exc}") from None


def _explained(exe: Any, args: argparse.Namespace, options: dict[str, Any], source: Any) -> Any:
    """``exe`` compiled again with each sparse matrix argument in its chosen layout."""
    from sparsecomp.compiler.driver import compile as compile_mlir
    from sparsecomp.compiler.variants import with_layouts
    from sparsecomp.formats import parse_layout
    from sparsecomp.runtime.prepared import infer_op

    matrix = read_matrix(args.explain)
    text = source if isinstance(source, str) else source.read_text()
    for name, function in exe.functions.items():
        try:
            op, argument = infer_op(function.signature)
        except SparsecompError as why:
            print(f"{name}: kept as written ({why})")
            continue
        dtype = function.signature.args[argument].dtype  # a .mtx reads as float64
        typed = matrix.astype(dtype) if matrix.dtype != dtype else matrix
        choice = exe.prepare(typed, function=name, k=args.k).choice  # as exe.prepare chooses
        k = f", k={args.k}" if op in ("spmm", "sddmm") else ""  # SpMV has no k
        print(f"{name} ({op}{k}): {choice.layout}: {choice.why} "
              f"[decided in {choice.seconds * 1e3:.0f} ms]")  # fmt: skip
        text = with_layouts(text, name, {argument: parse_layout(choice.layout).attr_text()})
    return compile_mlir(text, args.target, cache_results=not args.no_cache, **options)


if __name__ == "__main__":
    sys.exit(main())
