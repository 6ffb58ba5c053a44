"""``exe.plan()``: the layout conversions a compiled program runs, and their sizes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.runtime.plan import DENSE, Conversion, Plan

WIDTHS = "posWidth = 32, crdWidth = 32"
CSR = f"#sparse_iter.layout<{{map = (d0, d1) -> (d0 : dense, d1 : compressed), {WIDTHS}}}>"
CSC = f"#sparse_iter.layout<{{map = (d0, d1) -> (d1 : dense, d0 : compressed), {WIDTHS}}}>"

# A CSR argument also read transposed: the CPU wants CSC there, one conversion.
TWO_USES = """
#sp = #sparse_iter.sparsity<unstructured, density = 0.01>
#ta = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,
       affine_map<(m, n, k) -> (m, n)>]
func.func @two_uses(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                     outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  %1 = linalg.matmul indexing_maps = #ta ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                     outs(%0 : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}
"""


def test_plan_lists_the_conversion_and_the_program_is_right() -> None:
    exe = sparsecomp.compile(TWO_USES)
    (conversion,) = exe.plan().conversions
    assert conversion.function == "two_uses"
    assert conversion.location.startswith("<source>:")
    assert (conversion.source, conversion.destination) == (CSR, CSC)
    assert (conversion.dtype, conversion.shape) == ("float32", (None, None))
    assert "bytes depend on the shape" in str(exe.plan())
    a = sp.random(7, 7, density=0.3, format="csr", random_state=1, dtype=np.float32)
    b = np.ones((7, 3), np.float32)
    c = np.zeros((7, 3), np.float32)
    np.testing.assert_allclose(exe.two_uses(a, b, c), a @ b + a.T @ b, rtol=1e-5)


def test_no_conversions() -> None:
    exe = sparsecomp.compile(TWO_USES.replace("indexing_maps = #ta ", ""))
    assert exe.plan() == Plan(())
    assert str(exe.plan()) == "no layout conversions"


@settings(deadline=None, max_examples=40)
@given(
    rows=st.integers(0, 40),
    cols=st.integers(0, 40),
    density=st.floats(0, 1),
    dtype=st.sampled_from(["float32", "float64", "int8", "complex128"]),
)
def test_bytes_equal_the_real_buffers(rows: int, cols: int, density: float, dtype: str) -> None:
    """``bytes(shape, nse)`` is what scipy's CSC / CSR / dense buffers of that data take."""
    a = sp.random(rows, cols, density=density, format="csr", random_state=0).astype(dtype)
    for layout, matrix in ((CSC, a.tocsc()), (CSR, a)):
        conv = Conversion("f", "f.mlir:1:1", DENSE, layout, dtype, (None, None))
        real = matrix.indptr.astype(np.int32).nbytes + matrix.indices.astype(np.int32).nbytes
        assert conv.bytes((rows, cols), nse=matrix.nnz) == real + matrix.data.nbytes
    dense = Conversion("f", "f.mlir:1:1", CSR, DENSE, dtype, (rows, cols))
    assert dense.bytes() == a.toarray().nbytes
    static = Conversion("f", "f.mlir:1:1", DENSE, CSR, dtype, (rows, cols))
    fixed = 4 * (rows + 1)
    per = 4 + np.dtype(dtype).itemsize
    assert static.bytes_text() == f"{fixed} + {per}*nse bytes"
    assert static.bytes(nse=a.nnz) == fixed + per * a.nnz


def test_conversion_json_round_trip_and_errors() -> None:
    conv = Conversion("f", "f.mlir:3:4", CSR, CSC, "float64", (None, 5))
    assert Conversion.from_json(conv.to_json()) == conv
    with pytest.raises(sparsecomp.SparsecompError, match="dynamic shape: pass shape="):
        conv.bytes(nse=3)
    assert str(conv).startswith("f.mlir:3:4: in 'f': converts a ?x5 float64 tensor from ")
