"""A scalar CPU target (``vector_bits = 0``) compiles and matches scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.targets import CpuTarget

SPMM = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                           posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {scalar = TARGET}} {
  func.func @spmm(%A: tensor<?x?xf64, #csr>, %B: tensor<?x?xf64>, %C: tensor<?x?xf64>)
      -> tensor<?x?xf64> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #csr>, tensor<?x?xf64>)
                       outs(%C : tensor<?x?xf64>) -> tensor<?x?xf64>
    return %r : tensor<?x?xf64>
  }
}
"""


def test_scalar_target_is_valid() -> None:
    target = CpuTarget("x86_64", (), 0, 1)
    assert "vector_bits = 0" in target.attr_text()


@pytest.mark.parametrize("shape", [(0, 5), (7, 0), (1, 1), (37, 23)])
def test_scalar_target_matches_scipy(shape: tuple[int, int]) -> None:
    target = CpuTarget("x86_64", (), 0, 1).attr_text()
    exe = sparsecomp.compile(SPMM.replace("TARGET", target))
    a = sp.random(*shape, density=0.3, format="csr", random_state=5)
    rng = np.random.default_rng(1)
    b = rng.standard_normal((shape[1], 9))
    c = rng.standard_normal((shape[0], 9))
    np.testing.assert_allclose(exe(a, b, c), c + a @ b, rtol=1e-12, atol=1e-12)
