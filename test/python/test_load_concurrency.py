"""Several processes sharing kernels: saved directories rewritten while loaded, one
compile cache, evictions, memory pressure (runtime/loader.py, compiler/cache.py).

The suite once died of a segfault inside ``dlopen``: another process saved a
kernel into a directory this one had loaded, and ``shutil.copy2`` rewrote the
mapped ``kernel.so`` and ``libomp.so`` in place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from cpu_kernels import compiled, spmv
from sparsecomp.errors import SparsecompError

REPO = Path(__file__).resolve().parents[2]

READER = """
import sys, time
import numpy as np, scipy.sparse as sp, sparsecomp
exe = sparsecomp.load(sys.argv[1])
a = sp.random(400, 300, density=0.05, format="csr", dtype=np.float32, random_state=0)
x = np.linspace(0, 1, 300, dtype=np.float32)
print("ready", flush=True)
until = time.time() + float(sys.argv[2])
calls = 0
while time.time() < until:
    got = exe.spmv(a, x, np.zeros(400, np.float32))
    assert np.allclose(got, a @ x, rtol=1e-5), "wrong result"
    calls += 1
print("ok", calls)
"""


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_saving_over_a_kernel_another_process_runs(tmp_path: Path) -> None:
    """Another process keeps calling the f32 kernel it loaded from a directory while
    this one saves an f64 kernel of the same name there, and back, again and again.
    ``shutil.copy2`` rewrote the mapped files in place: the reader ran the other
    kernel's code (a wrong result or a segfault) or touched a truncated page (SIGBUS)."""
    f32, f64 = compiled(spmv("csr", "f32")), compiled(spmv("csr", "f64"))
    place = f32.save(tmp_path / "kernel")
    assert (place / "libomp.so").is_file()  # in the reader's global scope
    reader = _start(READER, str(place), "4")
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "ready"
    saves = 0
    while reader.poll() is None:
        (f64 if saves % 2 == 0 else f32).save(place)
        saves += 1
    out, err = reader.communicate()
    assert reader.returncode == 0, f"reader ended with {reader.returncode}:\n{err[-2000:]}"
    assert out.startswith("ok"), out
    assert saves > 10


def test_a_library_of_another_save_is_refused(tmp_path: Path) -> None:
    """A manifest with the library of another save (one save half done when a process
    loaded): refused by its ``library_sha256``, not called with the wrong ABI."""
    f32, f64 = compiled(spmv("csr", "f32")), compiled(spmv("csr", "f64"))
    place = f32.save(tmp_path / "kernel")
    shutil.copy(f64.directory / "kernel.so", place / "kernel.so")
    with pytest.raises(SparsecompError, match=r"not the library its manifest\.json describes"):
        sparsecomp.load(place)


def test_a_damaged_cache_entry_is_built_again(tmp_path: Path, monkeypatch) -> None:
    """A cached kernel whose library was removed (an eviction half done, a cleanup
    by hand) is built again, not an error on every later compile."""
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    program = spmv("csr", "f64")
    first = sparsecomp.compile(program)
    (first.directory / "kernel.so").unlink()
    again = sparsecomp.compile(program)
    assert again.directory == first.directory
    assert (again.directory / "kernel.so").is_file()
    a, x = sp.random(30, 20, density=0.2, format="csr", random_state=1), np.ones(20)
    np.testing.assert_allclose(again.spmv(a, x, np.zeros(30)), a @ x, rtol=1e-12)


ONE_RUNTIME = """
import sys
import sparsecomp
sparsecomp.load(sys.argv[1])   # its libomp.so copy
sparsecomp.load(sys.argv[2])   # a kernel with no copy beside it: the installed libomp
maps = open("/proc/self/maps").read().split()
print(sorted({p for p in maps if p.endswith("libomp.so")}))
"""


def test_a_process_runs_one_openmp_runtime(tmp_path: Path) -> None:
    """A saved kernel (libomp copy beside it) and a cached one (the installed libomp):
    two OpenMP runtimes were loaded into one process."""
    exe = compiled(spmv("csr", "f32"))
    saved = exe.save(tmp_path / "saved")
    assert "omp" in exe.manifest["needs"]
    done = subprocess.run(
        [sys.executable, "-c", ONE_RUNTIME, str(saved), str(exe.directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([str(saved / "libomp.so")])


def test_concurrent_compiles_of_one_program_build_it_once(tmp_path: Path) -> None:
    """Processes compiling the same program into one cache at once (xdist or Dask
    workers) wait for one build instead of each building it."""
    env = {**os.environ, "SPARSECOMP_CACHE_DIR": str(tmp_path / "cache")}
    source = tmp_path / "k.mlir"
    source.write_text(spmv("csr", "f32").replace("@spmv", "@spmv_once"))
    command = [
        str(Path(sys.executable).parent / "sparsecomp-compile"),
        str(source),
        "-v",
        "-o",
    ]
    procs = [
        subprocess.Popen(
            [*command, str(tmp_path / f"out{i}")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    assert sum("sparsecomp: total" in e for e in errs) == 1, errs
    assert sum("sparsecomp: cached" in e for e in errs) == 2, errs


def test_stress_cache_bounded() -> None:
    """scripts/stress_cache.py, short: loaders, a saver, an evictor and a memory hog
    on one cache; every call right or a clear error, no signal."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "stress_cache.py"), "--seconds", "8",
         "--loaders", "2", "--hog-mb", "256"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "1 of 1 runs passed" in done.stdout
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    assert int(rows["loader"][1]) > 0, done.stdout  # calls that ran and were checked
    assert int(rows["evictor"][1]) > 0, done.stdout  # kernels removed meanwhile


PRINTS_THEN_PARSES = """
import sys
import sparsecomp
exe = sparsecomp.load(sys.argv[1])   # needs libmlir_c_runner_utils.so, which needs libMLIR.so
exe.main()
from sparsecomp.ir.context import make_context
make_context()                       # the sparse_iter dialect library loads after it
print("ok")
"""


def test_runner_utils_do_not_shadow_the_bindings(tmp_path: Path) -> None:
    """A kernel needing MLIR's C runner utilities loaded before the first context: the
    utilities' libMLIR.so, put in the global scope, took the dialect library's
    symbols ("Trying to register different dialects for the same namespace: builtin",
    an abort of the process)."""
    exe = compiled(PRINTS)
    assert "c_runner_utils" in exe.manifest["needs"]
    done = subprocess.run(
        [sys.executable, "-c", PRINTS_THEN_PARSES, str(exe.directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(", "1,", "2", ")", "ok"]


PRINTS = """
func.func @main() {
  %c = arith.constant dense<[1.0, 2.0]> : vector<2xf64>
  vector.print %c : vector<2xf64>
  return
}
"""
