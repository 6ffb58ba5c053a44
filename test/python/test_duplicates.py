"""Repeated coordinates of nonunique layouts reach kernels summed.

The value of a COO tensor is the sum of its duplicates (as in scipy); a
kernel visiting each duplicate on its own is only right for bodies linear
in that operand, so every call passes nonunique tensors through
:meth:`SparseTensor.summed` first (the careful path; the fast path declines
tensors with duplicates). Checked over kernels our lowering compiles
(linear and not) and ones the upstream sparsifier compiles (a CSR result).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsecomp.formats import SparseTensor
from sparsecomp.formats.names import parse_layout

pytestmark = pytest.mark.usefixtures("private_cache")

COO = "#sparse_iter.layout<{map = (i, j) -> (i : compressed(nonunique), j : singleton(nonunique)), posWidth = 32, crdWidth = 32}>"  # noqa: E501
ID2 = "affine_map<(i, j) -> (i, j)>"

KERNELS = {
    # ones @ B into a CSR result: the upstream sparsifier (the original report)
    "matmul_csr_out": (
        f"""
#coo = {COO}
#csr = {parse_layout("csr", 2).attr_text()}
func.func @k(%A: tensor<?x?xf64>, %B: tensor<?x?xf64, #coo>) -> tensor<?x?xf64, #csr> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf64>
  %n = tensor.dim %B, %c1 : tensor<?x?xf64, #coo>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #csr>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf64>, tensor<?x?xf64, #coo>)
                     outs(%e : tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr>
  return %r : tensor<?x?xf64, #csr>
}}
""",
        lambda b, d: d @ b,
    ),
    # B .* B (not linear in B) into B's structure: sparse_iter's nest
    "square_same_structure": (
        f"""
#coo = {COO}
func.func @k(%B: tensor<?x?xf64, #coo>, %D: tensor<?x?xf64>) -> tensor<?x?xf64, #coo> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %B, %c0 : tensor<?x?xf64, #coo>
  %n = tensor.dim %B, %c1 : tensor<?x?xf64, #coo>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #coo>
  %r = linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
      ins(%B : tensor<?x?xf64, #coo>) outs(%e : tensor<?x?xf64, #coo>) {{
  ^bb0(%b: f64, %o: f64):
    %s = arith.mulf %b, %b : f64
    linalg.yield %s : f64
  }} -> tensor<?x?xf64, #coo>
  return %r : tensor<?x?xf64, #coo>
}}
""",
        lambda b, d: b * b,
    ),
    # D .* B into a dense output (zero-producing, reads D): sparse_iter's nest
    "times_dense": (
        f"""
#coo = {COO}
func.func @k(%B: tensor<?x?xf64, #coo>, %D: tensor<?x?xf64>) -> tensor<?x?xf64> {{
  %r = linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
      ins(%B : tensor<?x?xf64, #coo>) outs(%D : tensor<?x?xf64>) {{
  ^bb0(%b: f64, %o: f64):
    %s = arith.mulf %o, %b : f64
    linalg.yield %s : f64
  }} -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}}
""",
        lambda b, d: d * b,
    ),
}


@functools.cache
def compiled(name: str):  # -> sparsecomp.Executable
    import sparsecomp

    return sparsecomp.compile(KERNELS[name][0])


def _args(name: str, b: SparseTensor, d: np.ndarray) -> tuple[object, ...]:
    return (d, b) if name == "matmul_csr_out" else (b, d)


@pytest.mark.parametrize("name", list(KERNELS))
@settings(max_examples=15, deadline=None)
@given(
    m=st.integers(1, 6),
    n=st.integers(1, 6),
    nnz=st.integers(0, 20),
    seed=st.integers(0, 2**16),
)
def test_duplicates_are_summed(name: str, m: int, n: int, nnz: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    coords = np.stack([rng.integers(0, m, nnz), rng.integers(0, n, nnz)])
    vals = rng.integers(1, 5, nnz).astype(np.float64)
    exe = compiled(name)
    layout = exe.functions["k"].signature.args[1 if name == "matmul_csr_out" else 0].layout
    b = SparseTensor.from_coo((m, n), coords, vals, layout)
    dense_b = sp.coo_matrix((vals, tuple(coords)), shape=(m, n)).toarray()  # scipy sums
    d = rng.integers(1, 4, (m, m) if name == "matmul_csr_out" else (m, n)).astype(np.float64)
    for _ in range(2):  # the second call: the fast path must decline it too
        got = exe(*_args(name, b, d))
        got = got.to_dense() if isinstance(got, SparseTensor) else got
        np.testing.assert_allclose(got, KERNELS[name][1](dense_b, d))


def test_summed_keeps_tensors_without_duplicates() -> None:
    layout = parse_layout(COO, 2)
    t = SparseTensor.from_coo((3, 3), np.array([[0, 1], [1, 2]]), np.array([1.0, 2.0]), layout)
    assert t.summed() is t
    dup = SparseTensor.from_coo((2, 2), np.array([[0, 0], [1, 1]]), np.array([1.0, 2.0]), layout)
    summed = dup.summed()
    assert summed.nse == 1
    assert summed.layout == layout
    np.testing.assert_array_equal(summed.to_dense(), dup.to_dense())
