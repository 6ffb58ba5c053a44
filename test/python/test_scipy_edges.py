"""scipy matrices as users hold them, at their edges (a battery of session 42): a
``data`` array shorter than ``indptr`` says (assigned after construction, which scipy
does not check again), an unpruned CSR (``indptr[-1] < len(indices)``, what
``sum_duplicates`` on a matrix sharing its arrays leaves), and an operand prepared by
one executable given to another. Results are checked against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.errors import FormatError, SparsecompError

SPMV = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @spmv(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m) : tensor<?xf32>
  %z = arith.constant 0.0 : f32
  %y0 = linalg.fill ins(%z : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %y = linalg.matvec ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>)
                     outs(%y0 : tensor<?xf32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
"""


def _matrix(n: int, fmt: str = "csr", seed: int = 1) -> sp.spmatrix:
    return sp.random(n, n, density=0.3, format=fmt, dtype=np.float32, random_state=seed)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("n", [10, 3000])
def test_a_data_array_shorter_than_the_entries_is_refused(fmt: str, n: int) -> None:
    """It was read past its end: garbage at n = 10, a segfault at n = 3000."""
    exe = sparsecomp.compile(SPMV)
    a = _matrix(n, fmt)
    a.data = a.data[: a.data.shape[0] // 2].copy()  # scipy does not check this again
    with pytest.raises(FormatError, match=r"data holds \d+ values where indptr says \d+"):
        exe(a, np.ones(n, np.float32))


@pytest.mark.parametrize("layout", ["csr", "csc", "coo", "ell", "bsr:2x2", "hyb"])
def test_an_unpruned_csr_is_read_to_its_last_entry(layout: str) -> None:
    """scipy's own tocoo reads an unpruned matrix's tail (uninitialized row indices):
    prepare in any layout but CSR failed or, once, gave a wrong result."""
    exe = sparsecomp.compile(SPMV)
    a = sp.csr_matrix(
        (
            np.array([1, 2, 3, 4, 9, 9], np.float32),  # the last two: past indptr[-1]
            np.array([0, 1, 2, 0, 1, 2], np.int32),
            np.array([0, 1, 2, 4], np.int32),
        ),
        shape=(3, 3),
    )
    want = sp.csr_matrix(a.toarray()) @ np.array([1.0, 2.0, 5.0], np.float32)
    x = np.array([1.0, 2.0, 5.0], np.float32)
    np.testing.assert_allclose(exe(a, x), want, rtol=1e-6)
    np.testing.assert_allclose(exe(exe.prepare(a, layout), x), want, rtol=1e-6)


def test_an_operand_prepared_by_another_executable_is_refused() -> None:
    """Its variant is the other executable's kernel: ``2 A x`` gave ``A x``."""
    once = sparsecomp.compile(SPMV)
    twice = sparsecomp.compile(
        SPMV.replace("return %y", "%y2 = arith.addf %y, %y : tensor<?xf32>\n  return %y2")
    )
    a, x = _matrix(40), np.ones(40, np.float32)
    np.testing.assert_allclose(twice(twice.prepare(a), x), 2 * (a @ x), rtol=1e-5)
    np.testing.assert_allclose(once(once.prepare(a, "ell"), x), a @ x, rtol=1e-5)
    with pytest.raises(SparsecompError, match="another executable prepared"):
        twice(once.prepare(a), x)
    prepared = once.prepare(a, "ell")  # its packed tensor is any function's operand
    np.testing.assert_allclose(twice(prepared.tensor, x), 2 * (a @ x), rtol=1e-5)


def test_elementwise_ops_on_whole_tensors() -> None:
    """``arith``/``math`` ops on tensors, as MLIR allows them (they were "not bufferized",
    and on sparse tensors "not supported by the lowering"), equal numpy and scipy."""
    exe = sparsecomp.compile(
        """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @add(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  %C = arith.addf %A, %B : tensor<?x?xf32, #csr>
  return %C : tensor<?x?xf32, #csr>
}
func.func @expdouble(%x: tensor<?xf32>) -> tensor<?xf32> {
  %y = arith.addf %x, %x : tensor<?xf32>
  %z = math.exp %y : tensor<?xf32>
  return %z : tensor<?xf32>
}
"""
    )
    a, b = _matrix(30, seed=2), _matrix(30, seed=3)
    got = exe.add(a, b).to_scipy()
    assert abs(got - (a + b)).max() <= 1e-6
    x = np.linspace(-1, 1, 17, dtype=np.float32)
    np.testing.assert_allclose(exe.expdouble(x), np.exp(2 * x), rtol=1e-6)


def test_argument_errors_name_the_function_s_own_signature() -> None:
    """A call of the wrong shape raised from the variant compiled for its last
    dimension (a static K), whose signature renames the sizes: ``[s1, 8]``, or
    ``[s1, 30]`` for a rank-3 array, where the function says ``[s0, ?]``."""
    exe = sparsecomp.compile("examples/spmm.mlir")
    a = _matrix(30)
    b = np.ones((30, 8), np.float32)
    np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-5)  # its K = 8 variant
    own = r"argument 1 \(dense float32\[s0, s2\]\)"
    with pytest.raises(SparsecompError, match=own + ": size 29 in dimension 0"):
        exe(a, b[:29])
    with pytest.raises(SparsecompError, match=own + ": expected rank 2, got rank 3"):
        exe(a, b[None])
