"""benchmarks/cuda.py --emulate runs end to end and prints one row per kernel."""

from __future__ import annotations

import subprocess
import sys

from long_runs import strength


def test_emulated_traffic_table(repo, tmp_path) -> None:
    md = tmp_path / "cuda.md"
    done = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "cuda.py"), "--emulate",
         "--matrices", "pruned90", "--k", str(strength(16, 32)), "--markdown", str(md)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kernels = ("spmv", "spmm", "sddmm")
    rows = [r for r in md.read_text().splitlines() if r[1:].split("|")[0].strip() in kernels]
    assert [r.split("|")[1].strip() for r in rows] == list(kernels)
    spmm = [float(c) for c in rows[1].split("|")[3:-1]]
    # SpMM's columns on the lanes coalesce; the plain schedule moves more sectors.
    assert spmm[0] >= 0.8
    assert spmm[-1] > 1.5


def test_gpu_mode_says_what_is_missing(repo) -> None:
    """Without --emulate it measures on a GPU; where it cannot, it says why and exits 2."""
    done = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "cuda.py"), "--quick"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    from sparsecomp.runtime import cuda

    try:
        cuda._real_driver()
        why = None
    except cuda.CudaUnavailableError as exc:
        why = exc.message
    if why is None:
        assert done.returncode in (0, 2)
        return
    assert done.returncode == 2, done.stderr
    assert "cannot measure on a GPU here" in done.stderr
    # the benchmark's own name must not hide cuda-bindings' `cuda` package
    assert why.split(":")[0] in done.stderr
