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
    # What a clean process is told (this one may have benchmarks/ on sys.path, whose
    # cuda.py hides cuda-bindings' `cuda` package from it).
    probe = (
        "from sparsecomp.runtime import cuda\n"
        "try:\n    cuda._real_driver()\nexcept cuda.CudaUnavailableError as exc:\n"
        "    print(exc.message)\n"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True, cwd=repo / "test")  # fmt: skip
    why = found.stdout.strip() or None
    if why is None:
        assert done.returncode in (0, 2)
        return
    assert done.returncode == 2, done.stderr
    assert "cannot measure on a GPU here" in done.stderr
    # the benchmark's own name must not hide cuda-bindings' `cuda` package
    assert why.split(":")[0] in done.stderr


def test_chosen_schedule_table(repo) -> None:
    """The GPU run's last table: per op, the schedule exe.prepare's rule takes on each
    matrix (split where it says so and the split was timed), geomean beside by rows."""
    probe = (
        "import cuda_gpu\n"
        "times = {('spmv', 'a'): (2.0, 1.0), ('spmv-split', 'a'): (0.5, 1.0),\n"
        "         ('spmv', 'b'): (1.0, 1.0), ('spmv-split', 'b'): (4.0, 1.0),\n"
        "         ('spmm K=32', 'a'): (1.0, 2.0)}\n"
        "chosen = {('spmv', 'a'): 'nonzeros', ('spmv', 'b'): 'rows', ('spmm', 'a'): 'nonzeros'}\n"
        "print('\\n'.join(cuda_gpu._chosen_table(times, chosen, (32,))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, cwd=repo / "benchmarks")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [r.split("|")[1:-1] for r in done.stdout.splitlines() if r.startswith("| sp")]
    spmv, spmm = ([c.strip() for c in r] for r in rows)
    # a: split 2.0 (by rows 0.5); b: rows 1.0 -> geomean sqrt(2); by rows sqrt(0.5)
    assert spmv == ["spmv", "split on 1 of 2", "1.41", "0.71", "1.00 (b)"]
    # split chosen but not timed: the row schedule's time stands
    assert spmm == ["spmm K=32", "split on 1 of 1", "2.00", "2.00", "2.00 (a)"]
