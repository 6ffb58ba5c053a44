"""Compile an example and run it on random scipy data, checking against scipy.

    python examples/run.py examples/spmv.mlir [examples/spmm.mlir ...]

Each file is compiled with ``sparsecomp.compile`` (cached on disk), called on
a random sparse matrix with numpy/scipy arguments, compared with scipy, and
timed beside scipy.
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

import sparsecomp

ROWS, COLS, DENSITY, K = 20000, 20000, 1e-3, 64


def _inputs(name: str, rng: np.random.Generator) -> tuple[tuple[Any, ...], Callable[[], Any]]:
    """Arguments for the example's function and the scipy computation it must match."""
    A = sp.random(ROWS, COLS, density=DENSITY, format="csr", dtype=np.float32, random_state=rng)
    if name == "spmv":
        x = rng.standard_normal(COLS).astype(np.float32)
        return (A, x), lambda: A @ x
    if name == "spmm":
        B = rng.standard_normal((COLS, K)).astype(np.float32)
        return (A, B), lambda: A @ B
    if name == "sddmm":
        X = rng.standard_normal((ROWS, K)).astype(np.float32)
        Y = rng.standard_normal((COLS, K)).astype(np.float32)
        rows = np.repeat(np.arange(ROWS), np.diff(A.indptr))

        def sampled() -> sp.csr_matrix:  # scipy has no SDDMM: dot products at S's entries
            vals = A.data * np.einsum("ij,ij->i", X[rows], Y[A.indices])
            return sp.csr_matrix((vals, A.indices, A.indptr), shape=A.shape)

        return (A, X, Y), sampled
    raise SystemExit(f"no inputs known for function '{name}'")


def _close(got: Any, want: Any) -> bool:
    """``np.allclose`` of the two results; sparse ones compared entry by entry where
    they are stored (densifying a 20000 x 20000 result took 8 GB)."""
    if not sp.issparse(want):
        return bool(np.allclose(got, want, rtol=1e-4, atol=1e-4))
    if not sp.issparse(got) or got.shape != want.shape:
        return False
    diff = sp.coo_matrix(sp.csr_matrix(got) - sp.csr_matrix(want))  # entries of either
    ref = np.abs(np.asarray(sp.csr_matrix(want)[diff.row, diff.col]).ravel())
    return bool(np.all(np.abs(diff.data) <= 1e-4 + 1e-4 * ref))


def _best(fn: Callable[[], Any], repeat: int = 10, warmup: int = 3) -> float:
    """The fastest of ``repeat`` calls after ``warmup`` untimed ones (the first calls of a
    kernel fault in its pages and start its threads; scipy's get the same)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run(path: Path) -> bool:
    started, start = time.time(), time.perf_counter()
    exe = sparsecomp.compile(path)
    compiled = time.perf_counter() - start
    # a kernel built before this call came from the compile cache
    cached = (exe.directory / "manifest.json").stat().st_mtime < started
    (name,) = exe.functions
    args, reference = _inputs(name, np.random.default_rng(0))
    got, want = exe(*args), reference()
    got = got.to_scipy() if hasattr(got, "to_scipy") else got
    ok = _close(got, want)
    ours, theirs = _best(lambda: exe(*args)), _best(reference)
    print(
        f"{path.name:12s} {name}: {'matches scipy' if ok else 'DIFFERS FROM SCIPY'}; "
        f"compile {compiled * 1e3:.0f} ms{' (cached)' if cached else ''}; "
        f"run {ours * 1e3:.2f} ms, scipy {theirs * 1e3:.2f} ms "
        f"(scipy's time / ours: {theirs / ours:.2f}x)"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    print(f"{ROWS}x{COLS} random CSR, density {DENSITY}, K={K}, float32")
    return 0 if all([run(f) for f in args.files]) else 1


if __name__ == "__main__":
    sys.exit(main())
