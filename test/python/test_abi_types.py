"""ABI edges: complex values, functions Python cannot call, failed builds leave no litter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.tools import opt

MATVEC = """
#L = LAYOUT
func.func @matvec(%A: tensor<?x?xT, #L>, %x: tensor<?xT>) -> tensor<?xT> {
  %c0 = arith.constant 0 : index
  %zero = complex.constant [0.0 : E, 0.0 : E] : T
  %m = tensor.dim %A, %c0 : tensor<?x?xT, #L>
  %e = tensor.empty(%m) : tensor<?xT>
  %y = linalg.fill ins(%zero : T) outs(%e : tensor<?xT>) -> tensor<?xT>
  %r = linalg.matvec ins(%A, %x : tensor<?x?xT, #L>, tensor<?xT>)
                     outs(%y : tensor<?xT>) -> tensor<?xT>
  return %r : tensor<?xT>
}
func.func @scale(%x: tensor<?xT>, %s: T) -> tensor<?xT> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%x : tensor<?xT>) {
  ^bb0(%a: T):
    %t = complex.mul %a, %s : T
    linalg.yield %t : T
  } -> tensor<?xT>
  return %r : tensor<?xT>
}
"""
LAYOUTS = {
    # sparse_iter's own lowering
    "csr": "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>",
    # the upstream sparsifier (a #sparse_tensor encoding)
    "coo": "#sparse_tensor.encoding<{ map = (i, j) -> "
    "(i : compressed(nonunique), j : singleton) }>",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(("element", "dtype"), [("f32", np.complex64), ("f64", np.complex128)])
def test_complex_kernels_match_numpy(
    private_cache: None, layout: str, element: str, dtype: type
) -> None:
    src = MATVEC.replace("LAYOUT", LAYOUTS[layout]).replace("T", f"complex<{element}>")
    exe = sparsecomp.compile(src.replace("E", element))
    a = sp.random(60, 40, density=0.1, format="coo", random_state=3)
    a = (a + 1j * a.multiply(a)).astype(dtype)
    rng = np.random.default_rng(0)
    x = (rng.random(40) + 1j * rng.random(40)).astype(dtype)
    tol = 1e-5 if dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(exe.matvec(a, x), a @ x, rtol=tol, atol=tol)
    # complex scalars have no portable C form by value: a clear refusal, not garbage
    with pytest.raises(SparsecompError, match="scalar, which has no portable C form"):
        exe.scale(x, 2j)


INTERNAL = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @dump(%m: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %f = arith.constant -1.0 : f64
  %v = vector.transfer_read %m[%c0], %f : memref<?xf64>, vector<4xf64>
  vector.print %v : vector<4xf64>
  return
}
func.func @main() {
  %d = arith.constant dense<[[0.0, 5.0, 0.0, 6.0], [7.0, 0.0, 0.0, 8.0]]> : tensor<2x4xf64>
  %a = sparse_tensor.convert %d : tensor<2x4xf64> to tensor<2x4xf64, #CSR>
  %v = sparse_tensor.values %a : tensor<2x4xf64, #CSR> to memref<?xf64>
  call @dump(%v) : (memref<?xf64>) -> ()
  return
}
"""
# The same without sparse_tensor: compiled by sparse_iter's own lowering.
INTERNAL_OWN = """
func.func @dump(%m: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %f = arith.constant -1.0 : f64
  %v = vector.transfer_read %m[%c0], %f : memref<?xf64>, vector<4xf64>
  vector.print %v : vector<4xf64>
  return
}
func.func @main() {
  %m = memref.alloca() : memref<4xf64>
  %x = arith.constant 2.5 : f64
  linalg.fill ins(%x : f64) outs(%m : memref<4xf64>)
  %d = memref.cast %m : memref<4xf64> to memref<?xf64>
  call @dump(%d) : (memref<?xf64>) -> ()
  return
}
"""


@pytest.mark.parametrize(
    ("program", "printed"),
    [(INTERNAL, "( 5, 6, 7, 8 )"), (INTERNAL_OWN, "( 2.5, 2.5, 2.5, 2.5 )")],
)
def test_function_python_cannot_call_still_compiles(
    private_cache: None, tmp_path: Path, program: str, printed: str
) -> None:
    src = tmp_path / "prog.mlir"
    src.write_text(program)
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(src), "-e", "main"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, printed), done.stderr
    exe = sparsecomp.compile(src)
    assert list(exe.functions) == ["main"]
    with pytest.raises(SparsecompError, match=r"'dump' is not callable from Python: .*memref"):
        exe.dump
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(src), "-e", "dump"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert "it is not callable from Python" in done.stderr


# Fails in the back end (ownership-based deallocation refuses memref.dealloc).
FAILS = """
func.func @main() {
  %m = memref.alloc() : memref<4xf64>
  %x = arith.constant 1.0 : f64
  linalg.fill ins(%x : f64) outs(%m : memref<4xf64>)
  memref.dealloc %m : memref<4xf64>
  return
}
"""


def test_failed_builds_leave_no_folders_and_one_reproducer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(cache))
    monkeypatch.delenv("SPARSECOMP_REPRODUCER_DIR", raising=False)
    hints = []
    for _ in range(2):
        with pytest.raises(SparsecompError) as info:
            sparsecomp.compile(FAILS)
        hints.append(info.value.hint)
    assert hints[0] == hints[1]  # the same failure rewrites the same reproducer
    assert not list((cache / "kernels").glob(".build-*"))
    (repro,) = (cache / "reproducers").iterdir()
    assert hints[0].endswith(f"--pass-pipeline='builtin.module(sparsecomp-cpu-backend)' {repro}")
    capsys.readouterr()
    assert opt.main([str(repro), "--pass-pipeline=builtin.module(sparsecomp-cpu-backend)"]) == 1
    assert "memory free side-effect" in capsys.readouterr().err


def test_reproducers_in_the_cache_are_limited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparsecomp.compiler import cache

    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    count = cache.KEEP_REPRODUCERS + 5
    paths = [cache.save_reproducer(f"// {i}\n", "p", None) for i in range(count)]
    kept = sorted((tmp_path / "reproducers").iterdir())
    assert len(kept) == cache.KEEP_REPRODUCERS
    assert paths[-1] in kept
    asked = tmp_path / "mine"
    mine = [cache.save_reproducer("// x\n", "p", asked) for _ in range(3)]
    assert len(set(mine)) == 3  # where the user asked for them, every one is kept
    assert all(p.parent == asked for p in mine)
