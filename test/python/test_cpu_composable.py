"""Kernels over composable layouts (one matrix in several parts) against scipy.

An op that accumulates into its output runs once per part (SparseTIR's hyb
and BSR + remainder decompositions); see ``sparsecomp.lowering.parts``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import cpu_kernels
import sparsecomp
from sparsecomp.errors import ArgumentError, SparsecompError
from sparsecomp.formats import SparseTensor, parse_layout

pytestmark = pytest.mark.usefixtures("private_cache")


def spmv(layout: str) -> str:
    attr = parse_layout(layout).attr_text()
    return f"""
func.func @spmv(%A: tensor<?x?xf32, {attr}>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {{
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, {attr}>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""


def spmm(layout: str) -> str:
    attr = parse_layout(layout).attr_text()
    return f"""
func.func @spmm(%A: tensor<?x?xf32, {attr}>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, {attr}>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


compiled = cpu_kernels.compiled


def power_law(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    """Rows of very different lengths, so every ELL bucket and the rest get entries."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(cols, rng.zipf(1.7, rows) - 1)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([rng.choice(cols, n, replace=False) for n in lengths] or [[]])
    data = rng.standard_normal(indptr[-1]).astype(np.float32)
    m = sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=(rows, cols))
    m.sort_indices()
    return m


LAYOUTS = ["hyb:1:4", "hyb:2:8", "bsr+csr:4x4"]
SHAPES = [(200, 150), (0, 10), (10, 0), (1, 64), (64, 1)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_spmv(layout: str, shape: tuple[int, int]) -> None:
    A = power_law(*shape, seed=1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape[1]).astype(np.float32)
    y = rng.standard_normal(shape[0]).astype(np.float32)
    got = compiled(spmv(layout))(A, x, y)
    np.testing.assert_allclose(got, y + A @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_spmm_with_a_packed_tensor(layout: str) -> None:
    A = power_law(120, 90, seed=3)
    t = SparseTensor.from_scipy(A, layout)
    assert len(t.parts) > 1
    rng = np.random.default_rng(4)
    B = rng.standard_normal((90, 13)).astype(np.float32)
    C = rng.standard_normal((120, 13)).astype(np.float32)
    np.testing.assert_allclose(compiled(spmm(layout))(t, B, C), C + A @ B, rtol=1e-4, atol=1e-4)


def test_every_part_contributes() -> None:
    """Dropping any one part's values changes the result: each part's loop runs."""
    A = power_law(200, 150, seed=5)
    t = SparseTensor.from_scipy(A, "hyb:1:4")
    x = np.ones(150, np.float32)
    y = np.zeros(200, np.float32)
    exe = compiled(spmv("hyb:1:4"))
    full = exe(t, x, y)
    for k, part in enumerate(t.parts):
        if part.nse == 0:
            continue
        parts = [p.with_values(np.zeros_like(p.values)) if i == k else p
                 for i, p in enumerate(t.parts)]  # fmt: skip
        vals = np.concatenate([p.values for p in parts])
        got = exe(t.with_values(vals), x, y)
        assert not np.allclose(got, full), f"part {k} did not contribute"


def test_overwriting_body_is_refused() -> None:
    attr = parse_layout("hyb:1:4").attr_text()
    text = f"""
func.func @emul(%A: tensor<?x?xf32, {attr}>, %D: tensor<?x?xf32>, %E: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                         affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
    ins(%A, %D : tensor<?x?xf32, {attr}>, tensor<?x?xf32>) outs(%E : tensor<?x?xf32>) {{
  ^bb0(%a: f32, %d: f32, %o: f32):
    %p = arith.mulf %a, %d : f32
    linalg.yield %p : f32
  }} -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""
    with pytest.raises(SparsecompError, match="lowered part by part, which needs the body to"):
        sparsecomp.compile(text, cache_results=False)


def test_a_body_whose_sum_reads_the_output_is_refused() -> None:
    """``out + out * out * a`` is ``out`` where ``a`` is zero, so it passed the check;
    its parts, taken in turn, summed a row's entries in another order than the row's
    (a 1x4 row: CSR 2.17, hyb 2.05, silently). ``out + a`` alone still splits."""
    attr = parse_layout("hyb:2:1").attr_text()

    def rowsum(body: str) -> str:
        return f"""
func.func @k(%A: tensor<?x?xf64, {attr}>, %y: tensor<?xf64>) -> tensor<?xf64> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
    ins(%A : tensor<?x?xf64, {attr}>) outs(%y : tensor<?xf64>) {{
  ^bb0(%a: f64, %o: f64):
{body}
  }} -> tensor<?xf64>
  return %r : tensor<?xf64>
}}
"""

    reads = """    %oo = arith.mulf %o, %o : f64
    %f = arith.mulf %oo, %a : f64
    %v = arith.addf %o, %f : f64
    linalg.yield %v : f64"""
    with pytest.raises(SparsecompError, match="f not reading out"):
        sparsecomp.compile(rowsum(reads), cache_results=False)
    plain = """    %v = arith.addf %o, %a : f64
    linalg.yield %v : f64"""
    a = sp.csr_matrix(np.array([[1.0, 1.0, 0.0, 0.5]]))
    got = sparsecomp.compile(rowsum(plain))(SparseTensor.from_scipy(a, "hyb:2:1"), np.ones(1))
    np.testing.assert_allclose(got, [3.5])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dense_operands_sizes_are_checked(layout: str) -> None:
    """A composable kernel's signature had no size symbols (``[?, ?]``, ``[?]``), so an x
    one element short was read out of bounds (garbage; a segfault at 50M columns)."""
    A = power_law(37, 53, seed=3)
    exe = compiled(spmv(layout))
    with pytest.raises(ArgumentError, match="size 52 in dimension 0"):
        exe(A, np.ones(52, np.float32), np.zeros(37, np.float32))
    with pytest.raises(ArgumentError, match="size 36 in dimension 0"):
        exe(A, np.ones(53, np.float32), np.zeros(36, np.float32))
    got = exe(A, np.ones(53, np.float32), np.zeros(37, np.float32))
    np.testing.assert_allclose(got, A @ np.ones(53), rtol=1e-4, atol=1e-4)
