"""Nonordered levels in functions the upstream sparsifier compiles.

The sparsifier merges coordinates as if every level were ordered and its
conversions into a nonordered level do not terminate; the fallback stores
such levels ordered (``sparse-iter-order-levels``) and the runtime sorts
nonordered arguments at the call. Found by ``scripts/fuzz``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.formats import SparseTensor

ORDERED, NONORDERED = "compressed", "compressed(nonordered)"


def layout(level: str, transposed: bool = False) -> str:
    outer, inner = ("j", "i") if transposed else ("i", "j")
    amap = f"(i, j) -> ({outer} : dense, {inner} : {level})"
    return f"#sparse_iter.layout<{{map = {amap}, posWidth = 32, crdWidth = 32}}>"


def a_times_bt(la: str, lb: str, lo: str) -> str:
    """``A .* B^T`` into an output of layout ``lo``: a co-iteration sparse_iter leaves upstream."""
    a, b, o = layout(la), layout(lb), layout(lo)
    return f"""
func.func @k(%a: tensor<?x?xf32, {a}>, %b: tensor<?x?xf32, {b}>, %e: tensor<?x?xf32, {o}>)
    -> tensor<?x?xf32, {o}> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                         affine_map<(d0, d1) -> (d1, d0)>,
                                         affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<?x?xf32, {a}>, tensor<?x?xf32, {b}>) outs(%e : tensor<?x?xf32, {o}>) {{
    ^bb0(%x: f32, %y: f32, %z: f32):
      %m = arith.mulf %x, %y : f32
      linalg.yield %m : f32
    }} -> tensor<?x?xf32, {o}>
  return %r : tensor<?x?xf32, {o}>
}}"""


def unsorted(m: sp.csr_matrix) -> sp.csr_matrix:
    """``m`` with every row's column indices reversed (still canonical values)."""
    indices, data = m.indices.copy(), m.data.copy()
    for r in range(m.shape[0]):
        lo, hi = m.indptr[r], m.indptr[r + 1]
        indices[lo:hi], data[lo:hi] = indices[lo:hi][::-1], data[lo:hi][::-1]
    out = sp.csr_matrix((data, indices, m.indptr.copy()), shape=m.shape)
    out.has_sorted_indices = False
    return out


@pytest.mark.parametrize("la", [ORDERED, NONORDERED])
@pytest.mark.parametrize("lb", [ORDERED, NONORDERED])
@pytest.mark.parametrize("lo", ["dense", ORDERED])
def test_coiteration_with_nonordered_operands(private_cache: None, la: str, lb: str, lo: str):
    exe = sparsecomp.compile(a_times_bt(la, lb, lo))
    for seed in range(3):
        a = sp.random(7, 9, density=0.4, format="csr", dtype=np.float32, random_state=seed)
        b = sp.random(9, 7, density=0.6, format="csr", dtype=np.float32, random_state=seed + 9)
        want = a.toarray() * b.toarray().T
        out = SparseTensor.from_dense(np.zeros((7, 9), np.float32), layout(lo))
        for a_in, b_in in [(a, b), (unsorted(a), unsorted(b))]:
            got = exe(a_in, b_in, out).to_dense()
            np.testing.assert_array_equal(got, want)


ROWSUM_MAIN = """
#L = LAYOUT
func.func @rowsum(%a: tensor<12x7xi64, #L>) -> tensor<7xi64> {
  %e = tensor.empty() : tensor<7xi64>
  %z = arith.constant 0 : i64
  %f = linalg.fill ins(%z : i64) outs(%e : tensor<7xi64>) -> tensor<7xi64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<12x7xi64, #L>) outs(%f : tensor<7xi64>) {
    ^bb0(%x: i64, %o: i64):
      %one = arith.constant 1 : i64
      %p = arith.addi %x, %one : i64
      %s = arith.addi %o, %p : i64
      linalg.yield %s : i64
    } -> tensor<7xi64>
  return %r : tensor<7xi64>
}
func.func @main() {
  %d = arith.constant dense<DATA> : tensor<12x7xi64>
  %a = CONVERT
  %r = call @rowsum(%a) : (tensor<12x7xi64, #L>) -> tensor<7xi64>
  %c0 = arith.constant 0 : index
  %z = arith.constant 0 : i64
  %v = vector.transfer_read %r[%c0], %z : tensor<7xi64>, vector<7xi64>
  vector.print %v : vector<7xi64>
  return
}
"""


@pytest.mark.parametrize("spelling", ["sparse_iter", "sparse_tensor"])
def test_main_converting_into_a_nonordered_layout_terminates(tmp_path: Path, spelling: str):
    """A main() building a nonordered tensor: the sparsifier's convert used to loop forever."""
    rng = np.random.default_rng(5)
    d = rng.integers(-3, 4, size=(12, 7)) * (rng.random((12, 7)) < 0.3)
    if spelling == "sparse_iter":
        enc = layout(NONORDERED, transposed=True)
        convert = '"sparse_iter.set_encoding"(%d) : (tensor<12x7xi64>) -> tensor<12x7xi64, #L>'
    else:
        enc = "#sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed(nonordered)) }>"
        convert = "sparse_tensor.convert %d : tensor<12x7xi64> to tensor<12x7xi64, #L>"
    data = "[" + ", ".join("[" + ", ".join(map(str, row)) + "]" for row in d.tolist()) + "]"
    program = tmp_path / "main.mlir"
    program.write_text(
        ROWSUM_MAIN.replace("LAYOUT", enc).replace("CONVERT", convert).replace("DATA", data)
    )
    env = {**os.environ, "SPARSECOMP_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(program), "-e", "main"],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    want = (d + 1).sum(axis=0)  # x + 1 is not zero at zero: every element counts
    assert done.stdout.strip() == "( " + ", ".join(map(str, want.tolist())) + " )"
