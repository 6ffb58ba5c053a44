"""Sustainable read bandwidth of this machine, and the SpMV time it allows.

Method (STREAM-like, read only, numpy): a float32 array much larger than the
last-level cache (512 MiB; ``--quick``: 64 MiB) is read by

* ``sum``: one contiguous chunk per thread, each thread summing its chunk with
  ``ndarray.sum`` (numpy releases the GIL in reductions), for 1 thread and for
  every core;
* ``dot``: BLAS ``sdot`` of the array with a second one as large (numpy's BLAS
  threads; both arrays count as read).

Best of ``repeat`` passes each; the bandwidth is the best method, in bytes
read per second. Writes are not measured: an SpMV writes only y.

SpMV bound: y = A x must move at least its values (4 B per nonzero), column
indices (4 B per nonzero), row pointers (4 B per row + 4), x (4 B per column,
read once) and y (4 B per row, written once); bound time = bytes / bandwidth.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Bandwidth:
    read: float  # best read bandwidth, bytes/s
    method: str  # how it was reached
    array_bytes: int
    tried: dict[str, float]  # method -> bytes/s

    def describe(self) -> str:
        others = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in self.tried.items())
        return (
            f"{self.read / 1e9:.1f} GB/s read ({self.method}; {self.array_bytes >> 20} MiB "
            f"float32 arrays, best of N; all methods in GB/s: {others})"
        )


def _parallel_sum(chunks: list[np.ndarray]) -> float:
    if len(chunks) == 1:
        start = time.perf_counter()
        chunks[0].sum()
        return time.perf_counter() - start
    threads = [threading.Thread(target=c.sum) for c in chunks]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def measure(array_bytes: int = 512 << 20, repeat: int = 5) -> Bandwidth:
    """Measure read and triad bandwidth (see the module docstring)."""
    a = np.ones(array_bytes // 4, np.float32)
    tried: dict[str, float] = {}
    for threads in sorted({1, os.cpu_count() or 1}):
        chunks = np.array_split(a, threads)
        seconds = min(_parallel_sum(chunks) for _ in range(repeat))
        tried[f"numpy sum, {threads} thread(s)"] = a.nbytes / seconds
    b = np.ones_like(a)
    seconds = min(_timed(lambda: np.dot(a, b)) for _ in range(repeat))
    tried["BLAS sdot"] = 2 * a.nbytes / seconds
    method = max(tried, key=lambda k: tried[k])
    return Bandwidth(tried[method], method, array_bytes, tried)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def spmv_bytes(m: sp.csr_matrix) -> int:
    """Bytes an SpMV with ``m`` must move (int32 indices, float32 values)."""
    rows, cols = m.shape
    return 4 * (2 * m.nnz + (rows + 1) + cols + rows)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 64 MiB array (default 512 MiB)")
    parser.add_argument("--repeat", type=int, default=5, help="passes per method (best)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat takes a positive number")
    print(measure((64 if args.quick else 512) << 20, args.repeat).describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
