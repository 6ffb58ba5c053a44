"""Executable.save and sparsecomp.load in a fresh interpreter where importing MLIR fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from runtime_kernels import ADD, ADD_ABIS, kernel_dir
from sparsecomp.runtime import load
from sparsecomp.runtime.libs import library_path

BLOCK_MLIR = """
import sys

class BlockMlir:
    def find_spec(self, name, path=None, target=None):
        if name == "mlir" or name.startswith("mlir."):
            raise ImportError(f"test: importing {name} is blocked")
        return None

sys.meta_path.insert(0, BlockMlir())
"""

USE_SAVED = """
from pathlib import Path
import numpy as np
import sparsecomp.runtime
import sparsecomp

exe = sparsecomp.load(sys.argv[1])
a = np.arange(6, dtype=np.float32).reshape(2, 3)
print(exe(a, a).tolist())
print([p.name for p in exe.libraries])
assert exe.libraries == [Path(sys.argv[1]) / "libomp.so"]  # the copy beside kernel.so
print(sorted(m for m in sys.modules if m == "mlir" or m.startswith("mlir.")))
"""


def run_blocked(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_MLIR + code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


@pytest.fixture(scope="module")
def add_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kernel_dir(tmp_path_factory.mktemp("add"), ADD, ADD_ABIS, needs=("omp",))


def test_the_block_works(tmp_path: Path) -> None:
    proc = run_blocked("import mlir.ir", cwd=tmp_path)
    assert proc.returncode != 0
    assert "importing mlir is blocked" in proc.stderr


def test_save_then_load_without_mlir(add_dir: Path, tmp_path: Path) -> None:
    exe = load(add_dir)
    assert exe.libraries == [library_path("omp")]  # no local copy yet: the installed one
    saved = exe.save(tmp_path / "saved")
    names = {p.name for p in saved.iterdir()}
    stages = {"input.mlir", "llvm.mlir", "kernel.ll"}
    assert names == {"kernel.so", "manifest.json", "libomp.so", *stages}
    assert exe.save(add_dir) == add_dir  # saving onto itself changes nothing
    proc = run_blocked(USE_SAVED, str(saved), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert proc.stdout.splitlines() == [str((a + a).tolist()), "['libomp.so']", "[]"]
    # here the installed libomp is loaded already: it serves the saved kernel too
    assert load(saved).libraries == [library_path("omp")]


def test_saving_another_kernel_where_one_was_loaded(tmp_path: Path) -> None:
    """A directory loaded, emptied, saved into again with another kernel of the same
    function name and loaded: the dynamic loader handed back the first library under
    that path (float64 data read as float32: garbage; CSC as CSR: a segfault)."""
    import shutil

    import scipy.sparse as sp

    import sparsecomp
    from cpu_kernels import compiled, spmv

    a = sp.random(40, 30, density=0.2, format="csr", random_state=3)
    x = np.random.default_rng(3).random(30)
    first, second = compiled(spmv("csr", "f32")), compiled(spmv("csc", "f64"))
    place = tmp_path / "kernel"
    first.save(place)
    got = sparsecomp.load(place).spmv(
        a.astype(np.float32), x.astype(np.float32), np.zeros(40, np.float32)
    )
    np.testing.assert_allclose(got, a @ x, rtol=1e-5)
    shutil.rmtree(place)
    second.save(place)
    got = sparsecomp.load(place).spmv(a.tocsc(), x, np.zeros(40))
    np.testing.assert_allclose(got, a @ x, rtol=1e-12)


def test_a_loaded_executables_prepared_says_why_its_layout(tmp_path: Path) -> None:
    """It said "(forced)", as for layout="csr", where nothing was asked for."""
    import scipy.sparse as sp

    import sparsecomp

    exe = sparsecomp.compile(Path(__file__).resolve().parents[2] / "examples" / "spmm.mlir")
    exe.save(tmp_path / "kernel")
    a = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=0)
    loaded = sparsecomp.load(tmp_path / "kernel").prepare(a, k=4)
    assert "a loaded executable's own layout" in repr(loaded)
    assert repr(exe.prepare(a, layout="csr", k=4)).endswith("csr (forced))")
    b = np.ones((40, 4), np.float32)
    np.testing.assert_allclose(loaded.call((a, b)), a @ b, rtol=1e-5)
