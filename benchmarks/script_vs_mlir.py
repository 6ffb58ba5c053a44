"""Kernels written in Python (``sparsecomp.script``) against the same kernels in MLIR.

SpMV, SpMM (K=64) and SDDMM (K=32), each compiled twice: from
``examples/<op>.mlir`` and from the Python kernel of docs/script.md. Both are
the same stage-I IR after ``sparsecomp-cleanup`` (a test checks it), so the
times should be equal: this measures that nothing on the Python path (the
specialization lookup, the call) costs anything a user would see. Times are
the best of ``--reps`` rounds, the two taking turns within each round (this
machine is shared and noisy); the ratio is MLIR's time over Python's (1.00:
even).

    .venv/bin/python benchmarks/script_vs_mlir.py            # R-MAT 2^16, a band, uniform
    .venv/bin/python benchmarks/script_vs_mlir.py --quick    # small matrices (seconds)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import matrices

import sparsecomp
from sparsecomp.script import Tensor, f32, sparsity

REPO = Path(__file__).resolve().parents[1]


@sparsecomp.kernel
def spmv(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]) -> Tensor[f32, "M"]:
    y[i] += A[i, j] * x[j]
    return y


@sparsecomp.kernel
def spmm(
    A: Tensor[f32, ("M", "K"), sparsity("unstructured", density=0.01)],
    B: Tensor[f32, ("K", "N")],
) -> Tensor[f32, ("M", "N")]:
    C[i, j] += A[i, k] * B[k, j]
    return C


@sparsecomp.kernel
def sddmm(
    S: Tensor[f32, ("M", "N"), "csr"], X: Tensor[f32, ("M", "K")], Y: Tensor[f32, ("N", "K")]
) -> Tensor[f32, ("M", "N"), "csr"]:
    out[i, j] += S[i, j] * (X[i, k] * Y[j, k])
    return out


def operands(op: str, A: sp.csr_matrix, rng: np.random.Generator) -> tuple[Any, ...]:
    m, n = A.shape
    if op == "spmv":
        return A, rng.standard_normal(n).astype(np.float32)
    if op == "spmm":
        return A, rng.standard_normal((n, 64)).astype(np.float32)
    return (
        A,
        rng.standard_normal((m, 32)).astype(np.float32),
        rng.standard_normal((n, 32)).astype(np.float32),
    )


def same(a: Any, b: Any) -> bool:
    """Equal results, sparse ones compared entry by entry (never densified)."""
    if hasattr(a, "to_scipy"):
        diff = sp.csr_matrix(a.to_scipy() - b.to_scipy())
        return bool(diff.nnz == 0 or np.abs(diff.data).max() <= 1e-4)
    return bool(np.allclose(a, b, rtol=1e-5, atol=1e-5))


def best_of(fns: dict[str, Callable[[], Any]], reps: int, calls: int) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small matrices, few rounds")
    p.add_argument("--reps", type=int, help="timed rounds (default 7; 2 with --quick)")
    args = p.parse_args(argv)
    scale, reps, calls = (10, 2, 2) if args.quick else (16, 7, 5)
    reps = args.reps if args.reps is not None else reps  # given: it holds with --quick too
    mats = {
        f"rmat{scale}": matrices.rmat(scale),
        "band": matrices.band(2**scale),
        "uniform": matrices.uniform(2**scale, 16 / 2**scale),
    }
    python = {"spmv": spmv, "spmm": spmm, "sddmm": sddmm}
    rng = np.random.default_rng(0)
    print("| op | matrix | MLIR ms | Python ms | MLIR / Python |")
    print("|---|---|---|---|---|")
    for op, kernel in python.items():
        from_mlir = sparsecomp.compile(REPO / "examples" / f"{op}.mlir").functions[op]
        for name, A in mats.items():
            A = sp.csr_matrix(A, dtype=np.float32)
            args_ = operands(op, A, rng)
            if not same(from_mlir(*args_), kernel(*args_)):
                print(f"| {op} | {name} | WRONG: the two results differ | | |")
                continue
            t = best_of(
                {"mlir": lambda: from_mlir(*args_), "python": lambda: kernel(*args_)}, reps, calls
            )
            ratio = t["mlir"] / t["python"]
            print(
                f"| {op} | {name} | {t['mlir'] * 1e3:.3f} | {t['python'] * 1e3:.3f} | {ratio:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
