"""``sparse_iter.sparsify`` on kernel outputs, against :func:`sparsecomp.sparsify` on the host.

The streaming sparsifiers (threshold, keep_all) become a CSR result built in
the kernel, fused with an elementwise producer or reading a computed dense
value; the whole-tensor kinds are refused with a located error.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import cpu_kernels as K
import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.formats.literals import format_number

pytestmark = pytest.mark.usefixtures("private_cache")


compiled = K.compiled


THRESHOLD = "threshold[0.75]"
KEEP_ALL = "keep_all"


def expect_same(got, want) -> None:
    """Same kept positions (explicit zeros included) and values, rows sorted."""
    g, w = got.to_scipy().tocsr(), want.to_scipy().tocsr()
    np.testing.assert_array_equal(g.indptr, w.indptr)
    np.testing.assert_array_equal(g.indices, w.indices)
    np.testing.assert_array_equal(g.data, w.data)


@pytest.mark.parametrize("shape", [(20, 30), (0, 4), (4, 0), (1, 50), (50, 1)])
@pytest.mark.parametrize("elt", ["f32", "f64"])
def test_fused_threshold(shape: tuple[int, int], elt: str) -> None:
    rng = np.random.default_rng(1)
    dtype = np.float32 if elt == "f32" else np.float64
    x = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    got = compiled(K.sparsify(THRESHOLD, elt))(x, b)
    expect_same(got, sparsecomp.sparsify(x + b, "threshold:0.75", "csr"))


def test_threshold_keeps_zeros_at_zero_threshold() -> None:
    x = np.array([[0.0, 1.0, -2.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    b = np.zeros(3, dtype=np.float32)
    got = compiled(K.sparsify("threshold[0.0]"))(x, b)
    assert got.to_scipy().nnz == 6  # |x| >= 0 everywhere: explicit zeros are kept
    expect_same(got, sparsecomp.sparsify(x, "threshold:0", "csr"))


def test_keep_all_keeps_nan_and_drops_zeros() -> None:
    x = np.array([[0.0, np.nan, 3.0], [0.0, -0.0, 1.0]], dtype=np.float64)
    got = compiled(K.sparsify(KEEP_ALL, "f64", fused=False))(x)
    s = got.to_scipy()
    assert s.nnz == 3
    np.testing.assert_array_equal(s.indices, [1, 2, 2])
    assert np.isnan(s.data[0])


def test_integer_threshold() -> None:
    x = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    b = np.ones(4, dtype=np.int32)
    got = compiled(K.sparsify("threshold[3.0]", "i32"))(x, b)
    expect_same(got, sparsecomp.sparsify(x + b, "threshold:3", "csr"))


def test_sparsify_a_sparse_kernels_output() -> None:
    rng = np.random.default_rng(2)
    A = sp.random(40, 30, density=0.1, format="csr", dtype=np.float32, random_state=3)
    B = rng.standard_normal((30, 12)).astype(np.float32)
    C = np.zeros((40, 12), dtype=np.float32)
    got = compiled(K.spmm_sparsify(0.1))(A, B, C)
    dense = C + A @ B
    g, w = got.to_scipy(), sparsecomp.sparsify(dense, "threshold:0.1", "csr").to_scipy()
    np.testing.assert_array_equal(g.indices, w.indices)
    np.testing.assert_allclose(g.data, w.data, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(0, 30),
    n=st.integers(0, 30),
    seed=st.integers(0, 2**16),
    t=st.floats(0.0, 3.0),
)
def test_threshold_property(m: int, n: int, t: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n))
    got = compiled(K.sparsify(f"threshold[{format_number(t)}]", "f64", fused=False))(x)
    expect_same(got, sparsecomp.sparsify(x, f"threshold:{t!r}", "csr"))


def test_whole_tensor_sparsifier_is_refused() -> None:
    with pytest.raises(SparsecompError, match="'scalar_fraction' sparsifier needs the whole"):
        sparsecomp.compile(K.sparsify("scalar_fraction[0.5]", fused=False), cache_results=False)
