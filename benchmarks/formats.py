"""Packing times: a 10M-nonzero CSR matrix into every layout, beside scipy.

Run: ``.venv/bin/python benchmarks/formats.py [--nnz 10000000] [--repeat 3]``

Three matrices of about ``--nnz`` nonzeros, float32, built with numpy:

* ``uniform``: 1M x 1M, every row with Poisson(nnz/rows) nonzeros at random
  columns (ELL-friendly: short, even rows);
* ``powerlaw``: 1M x 1M, row lengths from a Zipf law (hyb's case: a few very
  long rows, many short ones);
* ``blocks``: 16x16 blocks about 60% full, scattered over a 1M x 1M matrix
  (BSR's case).

For each (matrix, layout) pair it times ``SparseTensor.from_scipy(csr, layout)``
(best of ``--repeat``) and, where scipy has the same conversion
(``tocsc``, ``tocoo``, ``tobsr``), scipy's time and the ratio
sparsecomp / scipy (below 1 means we are faster). Times include building
every buffer of the layout; the CSR input is already in memory.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsecomp.formats import SparseTensor

N = 1 << 20


def uniform(nnz: int, rng: np.random.Generator) -> sp.csr_matrix:
    lengths = rng.poisson(nnz / N, N)
    return _from_lengths(lengths, rng)


def powerlaw(nnz: int, rng: np.random.Generator) -> sp.csr_matrix:
    raw = np.minimum(rng.zipf(1.8, N), 20_000).astype(np.float64)  # longest row ~1/500 of nnz
    lengths = np.round(raw * nnz / raw.sum()).astype(np.int64)
    return _from_lengths(lengths, rng)


def _from_lengths(lengths: np.ndarray, rng: np.random.Generator) -> sp.csr_matrix:
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    cols = rng.integers(0, N, int(indptr[-1]), dtype=np.int32)
    values = rng.standard_normal(cols.size, dtype=np.float32)
    m = sp.csr_matrix((values, cols, indptr.astype(np.int64)), shape=(N, N))
    m.sum_duplicates()  # canonical: sorted, unique
    return m


def blocks(nnz: int, rng: np.random.Generator, b: int = 16, fill: float = 0.6) -> sp.csr_matrix:
    nblocks = int(nnz / (b * b * fill))
    grid = N // b
    flat = np.unique(rng.integers(0, grid * grid, nblocks, dtype=np.int64))
    mask = rng.random((flat.size, b, b)) < fill
    blk, r, c = np.nonzero(mask)
    rows = (flat[blk] // grid) * b + r
    cols = (flat[blk] % grid) * b + c
    values = rng.standard_normal(rows.size, dtype=np.float32)
    return sp.csr_matrix((values, (rows, cols)), shape=(N, N))


CASES: list[tuple[str, Callable[..., sp.csr_matrix], list[str]]] = [
    ("uniform", uniform, ["csr", "csc", "coo", "dcsr", "ell", "hyb"]),
    ("powerlaw", powerlaw, ["csr", "csc", "hyb", "hyb:4:32"]),
    ("blocks", blocks, ["bsr:16x16", "bsr+csr:16x16"]),
]
SCIPY: dict[str, Callable[[sp.csr_matrix], Any]] = {
    "csc": lambda m: m.tocsc(),
    "coo": lambda m: m.tocoo(),
    "bsr:16x16": lambda m: m.tobsr(blocksize=(16, 16)),
}


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nnz", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        f"{'matrix':<10}{'nnz':>11}  {'layout':<15}{'sparsecomp s':>13}{'scipy s':>10}{'ratio':>8}"
    )
    for name, make, layouts in CASES:
        start = time.perf_counter()
        m = make(args.nnz, rng)
        built = time.perf_counter() - start
        print(f"# {name}: built {m.shape} with {m.nnz} nonzeros in {built:.1f} s")
        for layout in layouts:
            ours = best(lambda: SparseTensor.from_scipy(m, layout), args.repeat)
            row = f"{name:<10}{m.nnz:>11}  {layout:<15}{ours:>13.3f}"
            if layout in SCIPY:
                theirs = best(lambda: SCIPY[layout](m), args.repeat)
                row += f"{theirs:>10.3f}{ours / theirs:>8.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
