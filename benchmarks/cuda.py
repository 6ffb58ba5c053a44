"""The CUDA schedule judged without a GPU: memory traffic counted by the emulator.

Run: ``.venv/bin/python benchmarks/cuda.py --emulate [--quick] [--k 32]
[--markdown FILE]``. Each kernel (SpMV, SpMM with K columns, SDDMM with K)
is compiled with ``target="cuda-emu:sm_80", profile=True`` and run once on
each matrix of :mod:`matrices` (``--quick``: the small sizes; the full sizes
take long, every access is a Python callback); the result is checked against
scipy. Per kernel and matrix the table shows, for all global loads and
stores of the launch (:mod:`sparsecomp.runtime.profile`):

* coalescing (``sector_efficiency``): the sectors a warp needs over those
  it touches;
* traffic: every distinct byte once, over the sectors moved (no caches, so
  data read again by other warps counts again);
* lanes: mean active lanes per warp request;
* bank conflicts: extra shared-memory passes (SpMM and SDDMM stage their
  rows' entries there); atomics: atomic adds (parts sharing rows);

* H100 us: the roofline, the larger of the sectors' bytes at 3.35 TB/s and
  the tensor-core flops at the H100's dense peak;
* est. us: the estimate calibrated on the H100's measured times
  (:mod:`sparsecomp.runtime.gpu_model`: a call's host time, the bytes, the
  busiest warp's requests; ``benchmarks/cuda_calibrate.py``).

Beside sparsecomp's schedule runs the plain CSR schedule, one thread per
row (``gpu_columns=False``: for SpMM, each thread walks its row's columns;
SpMV and SDDMM already are one row per thread). Ratios > 1 in the last
column: the plain schedule moves that many times more sectors.

On the power-law matrix (``rmat``) the table adds SpMV over ``hyb``
(``spmv-hyb``: ELL buckets of widths 1 .. 32 with a lane per slot, the rest's
rows, all longer than 32 entries, a warp each; one launch). On the
block-pruned matrix (``block16``) the table adds SpMM with the matrix as BSR
16x16 on tensor cores (``bsr-mma``: ``mma.sync`` m16n8k8, tf32), and on the
2:4 matrix SpMM in f16 on sparse tensor cores (``2:4-mma.sp``: ``mma.sp``
m16n8k16, half the bytes of the f32 kernels), each beside the same plain f32
CSR kernel.

Without ``--emulate`` it measures on this machine's GPU, side by side with
cuSPARSE, cuSPARSELt and cuBLAS (:mod:`cuda_gpu`; needs a CUDA driver,
``cuda-bindings``, CuPy and PyTorch; elsewhere it says what is missing and
exits with 2). The GPU's machine needs no MLIR: ``--save-executables DIR
--sm 90`` compiles the kernels here (no GPU needed), and ``--executables DIR``
runs them there (``PYTHONPATH=python:benchmarks``, with the repository's
``benchmarks/data``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
# This file's name shadows cuda-bindings' ``cuda`` namespace package while its
# directory is on sys.path (a module beats namespace portions wherever they
# are): import the package first, without this directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
try:
    import cuda.bindings.driver  # noqa: F401
except ImportError:  # the cuda extra is not installed: the GPU mode says so
    pass
sys.path.insert(0, str(HERE))

import matrices  # noqa: E402
from cuda_programs import (  # noqa: E402
    BLOCKED,
    BSR_SPMM,
    HYB_SPMV,
    NM_SPMM,
    POWER_LAW,
    TWO_FOUR,
    operands,
)

import sparsecomp  # noqa: E402
from sparsecomp.runtime.gpu_model import estimate_seconds  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
KERNELS = ("spmv", "spmm", "sddmm")


def _reference(name: str, args: tuple) -> np.ndarray:
    if name == "sddmm":
        a, x, y = args
        return a.multiply(x @ y.T).toarray()
    return args[0] @ args[1]


def _dense(result) -> np.ndarray:
    return result.to_scipy().toarray() if hasattr(result, "to_scipy") else result


def _two_four(exe: Any, a: sp.csr_matrix, k: int, rng: np.random.Generator) -> Any:
    """The 2:4 kernel's profile on ``a`` in f16 (f32 accumulation), checked against numpy."""
    from sparsecomp.formats import SparseTensor

    a16 = a.toarray().astype(np.float16)
    b = rng.standard_normal((a.shape[1], k)).astype(np.float16)
    c = np.zeros((a.shape[0], k), np.float32)
    prof = exe.profile(SparseTensor.from_dense(a16, "nm:2:4"), b, c)
    want = a16.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(prof.result, want, rtol=1e-4, atol=1e-3)
    return prof


def _row(kernel: str, matrix: str, ours: Any, plain: Any) -> str:
    t = ours.total
    return (
        f"| {kernel} | {matrix} | {t.sector_efficiency:.2f} | "
        f"{t.traffic_efficiency:.2f} | {t.lane_utilization:.2f} | {ours.bank_conflicts} | "
        f"{ours.atomics} | "
        f"{ours.h100_seconds * 1e6:.2f} | {estimate_seconds(ours.model_features()) * 1e6:.1f} | "
        f"{plain.total.sector_efficiency:.2f} | "
        f"{plain.h100_seconds * 1e6:.2f} | "
        f"{plain.total.sectors / max(1, t.sectors):.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--emulate", action="store_true", help="count traffic in the emulator")
    p.add_argument("--reps", type=int, default=20, help="timed calls per case on a GPU")
    p.add_argument("--quick", action="store_true", help="the small matrices (default: small)")
    p.add_argument("--k", type=int, default=32, help="dense columns of SpMM and SDDMM")
    p.add_argument("--matrices", default="", help="comma-separated subset of the matrices")
    p.add_argument("--markdown", type=Path, help="also write the table to this file")
    p.add_argument(
        "--save-executables",
        type=Path,
        metavar="DIR",
        help="compile the GPU run's kernels for --sm into DIR and exit (no GPU needed)",
    )
    p.add_argument(
        "--executables",
        type=Path,
        metavar="DIR",
        help="on a GPU: run the kernels saved in DIR (no MLIR needed)",
    )
    p.add_argument(
        "--nm-sizes",
        default="4096,8192,16384",
        help="on a GPU: sizes of the square 2:4 f16 weights",
    )
    p.add_argument("--sm", type=int, default=90, help="compute capability for --save-executables")
    args = p.parse_args(argv)
    if args.save_executables is not None:
        import cuda_gpu

        cuda_gpu.save(cuda_gpu.build(args.sm), args.save_executables)
        print(f"benchmarks/cuda.py: saved {', '.join(cuda_gpu.KERNELS)} for sm_{args.sm} "
              f"into {args.save_executables}")  # fmt: skip
        return 0
    if not args.emulate:
        return _on_gpu(args)
    chosen = set(filter(None, args.matrices.split(",")))
    specs = [s for s in matrices.suite(quick=True) if not chosen or s.name in chosen]
    exes = {
        (kernel, columns): sparsecomp.compile(
            EXAMPLES / f"{kernel}.mlir", "cuda-emu:sm_80", profile=True, gpu_columns=columns
        )
        for kernel in KERNELS
        for columns in (True, False)
    }
    from sparsecomp.formats import parse_layout

    hyb_program = HYB_SPMV.format(attr=parse_layout("hyb").attr_text())
    # the layouts' own kernels, compiled where a chosen matrix needs them
    names = {s.name for s in specs}
    emulated = functools.partial(sparsecomp.compile, target="cuda-emu:sm_80", profile=True)
    bsr = emulated(BSR_SPMM) if names & set(BLOCKED) else None
    nm = emulated(NM_SPMM) if names & set(TWO_FOUR) else None
    hyb = emulated(hyb_program) if names & set(POWER_LAW) else None
    rng = np.random.default_rng(0)
    lines = [
        f"CUDA schedule under emulation (sm_80), K = {args.k}; traffic counted in 32-byte sectors",
        "",
        "| kernel | matrix | coalescing | traffic | lanes | bank conflicts | atomics "
        "| H100 us | est. us | plain coalescing | plain H100 us | plain / ours |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for spec in specs:
        a = spec.build()
        for kernel in KERNELS:
            inputs = operands(kernel, a, args.k, rng)
            want = _reference(kernel, inputs)
            profiles = {}
            for columns in (True, False):
                prof = exes[(kernel, columns)].profile(*inputs)
                np.testing.assert_allclose(_dense(prof.result), want, rtol=1e-3, atol=1e-3)
                profiles[columns] = prof
            lines.append(_row(kernel, spec.name, profiles[True], profiles[False]))
            if kernel == "spmv" and spec.name in POWER_LAW:
                assert hyb is not None
                a_op, x_op = inputs
                prof = hyb.profile(a_op, x_op, np.zeros(a_op.shape[0], np.float32))
                np.testing.assert_allclose(prof.result, want, rtol=1e-3, atol=1e-3)
                lines.append(_row("spmv-hyb", spec.name, prof, profiles[False]))
            if kernel == "spmm" and spec.name in BLOCKED:
                assert bsr is not None
                prof = bsr.profile(*inputs)
                # tf32 inputs: within tf32's precision of the exact product.
                scale = 1 + np.abs(want).max()
                np.testing.assert_allclose(prof.result, want, rtol=0, atol=4e-3 * scale)
                lines.append(_row("bsr-mma", spec.name, prof, profiles[False]))
            if kernel == "spmm" and spec.name in TWO_FOUR:
                assert nm is not None
                lines.append(_row("2:4-mma.sp", spec.name, _two_four(nm, a, args.k, rng),
                                  profiles[False]))  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


def _on_gpu(args: argparse.Namespace) -> int:
    """Measure on this machine's GPU beside cuSPARSE, cuSPARSELt and cuBLAS (cuda_gpu.py)."""
    import cuda_gpu

    why = cuda_gpu.available()
    if why is not None:
        print(f"benchmarks/cuda.py: cannot measure on a GPU here: {why}", file=sys.stderr)
        print("benchmarks/cuda.py --emulate counts the kernels' traffic on this CPU instead",
              file=sys.stderr)  # fmt: skip
        return 2
    ks = (args.k, 128) if args.k != 128 else (128,)
    exes = None
    if args.executables is not None:
        exes = cuda_gpu.load(args.executables, cuda_gpu.cuda.driver().sm)
    sizes = tuple(int(v) for v in args.nm_sizes.split(",") if v)
    chosen = frozenset(filter(None, args.matrices.split(",")))
    lines, failed = cuda_gpu.run(args.reps, ks, args.quick, exes, sizes, chosen)
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if failed:
        print(f"benchmarks/cuda.py: {len(failed)} case(s) failed: {', '.join(failed)}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
