"""Narrow index widths of sparse results: an overflow is an error, never silent.

A result declared with 8- or 16-bit positions can hold more entries than
its positions address; the runtime checks every narrow sparse result
(:mod:`sparsecomp.runtime.overflow`) and raises a SparsecompError naming
the width and the fix. Checked on results built by the upstream sparsifier
(COO, and loose_compressed rows, whose (lo, hi) pairs wrap too) and one
built by sparse_iter's row-wise kernels (CSR).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp

from sparsecomp.errors import SparsecompError
from sparsecomp.formats import SparseTensor

pytestmark = pytest.mark.usefixtures("private_cache")

ID2 = "affine_map<(i, j) -> (i, j)>"
CSR32 = "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>"  # noqa: E501


def _out_layout(kind: str, width: int) -> str:
    levels = {
        "coo": "i : compressed(nonunique), j : singleton",
        "csr": "i : dense, j : compressed",
        "loose": "i : dense, j : loose_compressed",
    }[kind]
    return f"#sparse_iter.layout<{{map = (i, j) -> ({levels}), posWidth = {width}, crdWidth = 32}}>"


@functools.cache
def compiled(kind: str, width: int):  # -> sparsecomp.Executable
    """``A + B`` into a ``kind`` result with ``width``-bit positions.

    ``coo``, ``loose``: B dense (upstream sparsifier); ``csr``: B a CSR
    matrix of another structure (sparse_iter's row-wise union).
    """
    import sparsecomp

    b_type = "tensor<?x?xi32, #csr>" if kind == "csr" else "tensor<?x?xi32>"
    text = f"""
#csr = {CSR32}
#out = {_out_layout(kind, width)}
func.func @k(%A: tensor<?x?xi32, #csr>, %B: {b_type}) -> tensor<?x?xi32, #out> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xi32, #csr>
  %n = tensor.dim %A, %c1 : tensor<?x?xi32, #csr>
  %e = tensor.empty(%m, %n) : tensor<?x?xi32, #out>
  %r = linalg.generic {{indexing_maps = [{ID2}, {ID2}, {ID2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%A, %B : tensor<?x?xi32, #csr>, {b_type}) outs(%e : tensor<?x?xi32, #out>) {{
  ^bb0(%a: i32, %b: i32, %o: i32):
    %s = arith.addi %a, %b : i32
    linalg.yield %s : i32
  }} -> tensor<?x?xi32, #out>
  return %r : tensor<?x?xi32, #out>
}}
"""
    return sparsecomp.compile(text)


def _call(kind: str, width: int, n: int) -> tuple[SparseTensor, np.ndarray]:
    """The result for ``n x n`` operands (``n * n`` entries), and numpy's answer."""
    ones = np.ones((n, n), np.int32)
    a, b = np.triu(ones), (np.tril(ones, -1) if kind == "csr" else ones)
    sparse_b = SparseTensor.from_dense(b, "csr") if kind == "csr" else b
    return compiled(kind, width)(sp.csr_matrix(a), sparse_b), a + b


@pytest.mark.parametrize("kind", ["coo", "csr", "loose"])
@pytest.mark.parametrize(
    ("width", "fits", "overflows"), [(8, 11, 12), (16, 181, 182), (16, 150, 256)]
)
def test_narrow_positions_overflow_is_an_error(
    kind: str, width: int, fits: int, overflows: int
) -> None:
    got, want = _call(kind, width, fits)  # fits * fits entries: within the width
    np.testing.assert_array_equal(got.to_dense(), want)
    with pytest.raises(SparsecompError, match=f"more than {width}-bit positions") as err:
        _call(kind, width, overflows)
    assert "result 0" in str(err.value)
    assert "pos_width" in str(err.value)
