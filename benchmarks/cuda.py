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

* H100 us: the roofline, the larger of the sectors' bytes at 3.35 TB/s and
  the tensor-core flops at the H100's dense peak.

Beside sparsecomp's schedule runs the plain CSR schedule, one thread per
row (``gpu_columns=False``: for SpMM, each thread walks its row's columns;
SpMV and SDDMM already are one row per thread). Ratios > 1 in the last
column: the plain schedule moves that many times more sectors.

On the block-pruned matrix (``block16``) the table adds SpMM with the
matrix as BSR 16x16 on tensor cores (``bsr-mma``: ``mma.sync`` m16n8k8,
tf32), and on the 2:4 matrix SpMM in f16 on sparse tensor cores
(``2:4-mma.sp``: ``mma.sp`` m16n8k16, half the bytes of the f32 kernels),
each beside the same plain f32 CSR kernel.

Measuring on a GPU (cuSPARSE, cuSPARSELt, cuBLAS side by side) needs the
CUDA runtime, which is not built yet.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import matrices

import sparsecomp

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
KERNELS = ("spmv", "spmm", "sddmm")
#: SpMM with the matrix as 16x16 blocks: tensor cores on a CUDA target.
BSR_SPMM = """
#blocks = #sparse_iter.sparsity<block[16, 16], density = 0.1>
func.func @spmm(%A: tensor<?x?xf32, #blocks>, %B: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #blocks>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #blocks>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""
#: Matrices the tensor-core BSR kernel runs on.
BLOCKED = ("block16",)
#: 2:4 f16 SpMM with an outs operand: sparse tensor cores on a CUDA target.
NM_SPMM = """
#s = #sparse_iter.sparsity<nm[2, 4]>
func.func @spmm(%A: tensor<?x?xf16, #s>, %B: tensor<?x?xf16>,
                %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #s>, tensor<?x?xf16>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""
#: Matrices the 2:4 kernel runs on (as f16).
TWO_FOUR = ("2:4",)


def _operands(name: str, a: sp.csr_matrix, k: int, rng: np.random.Generator) -> tuple:
    m, n = a.shape
    if name == "spmv":
        return (a, rng.standard_normal(n).astype(np.float32))
    if name == "spmm":
        return (a, rng.standard_normal((n, k)).astype(np.float32))
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((n, k)).astype(np.float32)
    return (a, x, y)


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
        f"{t.traffic_efficiency:.2f} | {t.lane_utilization:.2f} | "
        f"{ours.h100_seconds * 1e6:.2f} | {plain.total.sector_efficiency:.2f} | "
        f"{plain.h100_seconds * 1e6:.2f} | "
        f"{plain.total.sectors / max(1, t.sectors):.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--emulate", action="store_true", help="count traffic in the emulator")
    p.add_argument("--quick", action="store_true", help="the small matrices (default: small)")
    p.add_argument("--k", type=int, default=32, help="dense columns of SpMM and SDDMM")
    p.add_argument("--matrices", default="", help="comma-separated subset of the matrices")
    p.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = p.parse_args(argv)
    if not args.emulate:
        print("benchmarks/cuda.py: only --emulate is available (no CUDA runtime yet)")
        return 2
    chosen = set(filter(None, args.matrices.split(",")))
    specs = [s for s in matrices.suite(quick=True) if not chosen or s.name in chosen]
    exes = {
        (kernel, columns): sparsecomp.compile(
            EXAMPLES / f"{kernel}.mlir", "cuda-emu:sm_80", profile=True, gpu_columns=columns
        )
        for kernel in KERNELS
        for columns in (True, False)
    }
    bsr = sparsecomp.compile(BSR_SPMM, "cuda-emu:sm_80", profile=True)
    nm = sparsecomp.compile(NM_SPMM, "cuda-emu:sm_80", profile=True)
    rng = np.random.default_rng(0)
    lines = [
        f"CUDA schedule under emulation (sm_80), K = {args.k}; traffic counted in 32-byte sectors",
        "",
        "| kernel | matrix | coalescing | traffic | lanes | H100 us | plain coalescing "
        "| plain H100 us | plain / ours |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for spec in specs:
        a = spec.build()
        for kernel in KERNELS:
            operands = _operands(kernel, a, args.k, rng)
            want = _reference(kernel, operands)
            profiles = {}
            for columns in (True, False):
                prof = exes[(kernel, columns)].profile(*operands)
                np.testing.assert_allclose(_dense(prof.result), want, rtol=1e-3, atol=1e-3)
                profiles[columns] = prof
            lines.append(_row(kernel, spec.name, profiles[True], profiles[False]))
            if kernel == "spmm" and spec.name in BLOCKED:
                prof = bsr.profile(*operands)
                # tf32 inputs: within tf32's precision of the exact product.
                scale = 1 + np.abs(want).max()
                np.testing.assert_allclose(prof.result, want, rtol=0, atol=4e-3 * scale)
                lines.append(_row("bsr-mma", spec.name, prof, profiles[False]))
            if kernel == "spmm" and spec.name in TWO_FOUR:
                lines.append(_row("2:4-mma.sp", spec.name, _two_four(nm, a, args.k, rng),
                                  profiles[False]))  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
