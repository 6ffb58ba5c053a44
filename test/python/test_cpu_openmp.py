"""OpenMP in compiled CPU kernels: the target's thread count and the loop schedule.

The kernel is benchmarks/kernels/spmv.mlir (a CSR row loop marked parallel);
the target is the host's with ``threads`` replaced. Thread counts are checked
in the LLVM-dialect stage and, in a fresh process (its own libomp thread
pool), by the threads a call leaves behind.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

SPMV = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels" / "spmv.mlir"

#: Calls the kernel in argv[1] once and prints how many threads the process gained.
COUNT_THREADS = """
import os, sys
import numpy as np, scipy.sparse as sp
import sparsecomp
exe = sparsecomp.load(sys.argv[1])
a = sp.random(300, 200, density=0.05, format="csr", dtype=np.float32, random_state=1)
before = len(os.listdir("/proc/self/task"))
exe(a, np.ones(200, np.float32))
print(len(os.listdir("/proc/self/task")) - before)
"""


pytestmark = pytest.mark.usefixtures("private_cache")


def compiled(threads: int):  # -> Executable
    import sparsecomp
    from sparsecomp.targets import detect_host

    return sparsecomp.compile(SPMV, target=dataclasses.replace(detect_host(), threads=threads))


def check_spmv(exe) -> None:
    a = sp.random(97, 61, density=0.1, format="csr", dtype=np.float32, random_state=0)
    x = np.random.default_rng(0).standard_normal(61).astype(np.float32)
    np.testing.assert_allclose(exe(a, x), a @ x, rtol=1e-5, atol=1e-5)


def llvm_stage(exe) -> str:
    return (exe.directory / "llvm.mlir").read_text()


@pytest.mark.parametrize("threads", [1, 3])
def test_target_threads_become_num_threads(threads: int) -> None:
    exe = compiled(threads)
    check_spmv(exe)
    # fewer than 32 rows run on the calling thread: the if clause
    found = re.search(r"omp\.parallel if\(%\w+\) num_threads\((%\w+) : i32\)", llvm_stage(exe))
    assert found, "the parallel region has no num_threads clause"
    assert f"{found.group(1)} = llvm.mlir.constant({threads} : i32) : i32" in llvm_stage(exe)
    assert json.loads((exe.directory / "manifest.json").read_text())["needs"] == ["omp"]


def test_zero_threads_leave_the_count_to_libomp() -> None:
    exe = compiled(0)
    check_spmv(exe)
    assert re.search(r"omp\.parallel if\(%\w+\) \{", llvm_stage(exe))
    assert not re.search(r"omp\.parallel [^{]*num_threads", llvm_stage(exe))


def test_row_loop_is_scheduled_dynamically() -> None:
    text = llvm_stage(compiled(2))
    assert re.search(r"omp\.wsloop schedule\(dynamic = %\w+ : i32\)", text)
    assert "llvm.call @omp_get_num_threads()" in text


@pytest.mark.parametrize(("threads", "workers"), [(1, 0), (3, 2)])
def test_calls_run_on_the_target_threads(threads: int, workers: int) -> None:
    """num_threads overrides OMP_NUM_THREADS: a 3-thread kernel starts 2 workers."""
    exe = compiled(threads)
    env = {"OMP_NUM_THREADS": "1" if threads > 1 else "4", "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", COUNT_THREADS, str(exe.directory)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    assert int(out.stdout) == workers
