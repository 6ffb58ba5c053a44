"""End-to-end numerics of compiled CPU kernels against scipy / numpy.

Each kernel is compiled once per test session (into a private cache) and run
on several matrices: random ones, an empty one, a single row, and matrices
with empty rows and columns.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import cpu_kernels as K
from sparsecomp.formats import SparseTensor

pytestmark = pytest.mark.usefixtures("private_cache")


compiled = K.compiled


DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}
TOL = {"f32": 1e-4, "f64": 1e-10, "i32": 0}
SHAPES = [(37, 23), (0, 5), (5, 0), (1, 40), (40, 1), (64, 64)]


def matrix(shape: tuple[int, int], density: float, dtype: type, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(*shape, density=density, format="csr", random_state=rng, dtype=np.float64)
    if m.nnz:
        m.data = rng.integers(-5, 6, m.nnz).astype(np.float64) if dtype == np.int32 else m.data
    m = m.astype(dtype)
    m.eliminate_zeros()
    return m


def dense(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.int32:
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def close(got: np.ndarray, want: np.ndarray, elt: str) -> None:
    np.testing.assert_allclose(got, want, rtol=TOL[elt], atol=TOL[elt])


@pytest.mark.parametrize("layout", ["csr", "csc", "coo", "dcsr", "ell", "bsr:2x2"])
@pytest.mark.parametrize("shape", SHAPES)
def test_spmv_layouts(layout: str, shape: tuple[int, int]) -> None:
    exe = compiled(K.spmv(layout))
    A = matrix(shape, 0.2, np.float32, 1)
    x, y = dense((shape[1],), np.float32, 2), dense((shape[0],), np.float32, 3)
    got = exe(SparseTensor.from_scipy(A, layout), x, y)
    close(got, y + A @ x, "f32")


@given(
    rows=st.integers(0, 40),
    cols=st.integers(0, 40),
    layout=st.sampled_from(["bsr:3x3", "bsr:6x6", "bsr:2x3", "bsr:3x1"]),
    k=st.sampled_from([0, 5, 17]),
    bits=st.sampled_from([0, 256]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=30, deadline=None)
def test_bsr_block_edges_property(
    rows: int, cols: int, layout: str, k: int, bits: int, seed: int
) -> None:
    """SpMV (``k == 0``) and SpMM over BSR, scalar (``bits == 0``) or vectorized, agree
    with scipy where the matrix's edges cut blocks: whole blocks run loops of
    constant trips, the edge's the clamped ones (``levels.dense_loop``); SpMV keeps a
    block row's rows in scalars over its blocks (the scalar jam) and writes no row
    past the edge."""
    A = matrix((rows, cols), 0.3, np.float32, seed)
    packed = SparseTensor.from_scipy(A, layout)
    if k == 0:
        x, y = dense((cols,), np.float32, seed + 1), dense((rows,), np.float32, seed + 2)
        close(compiled(K.spmv(layout), vector_bits=bits)(packed, x, y), y + A @ x, "f32")
    else:
        B = dense((cols, k), np.float32, seed + 1)
        close(compiled(K.spmm(layout), vector_bits=bits)(packed, B), A @ B, "f32")


@pytest.mark.parametrize("elt", ["f32", "f64", "i32"])
def test_spmv_types(elt: str) -> None:
    exe = compiled(K.spmv("csr", elt))
    A = matrix((50, 30), 0.1, DTYPES[elt], 4)
    x, y = dense((30,), DTYPES[elt], 5), dense((50,), DTYPES[elt], 6)
    close(exe(A, x, y), y + A @ x, elt)


@pytest.mark.parametrize("layout", ["csr", "csc", "coo", "bsr:2x2", "bsr:4x1", "bsr:1x4"])
@pytest.mark.parametrize("k", [1, 7, 32, 45])
@pytest.mark.parametrize("elt", ["f32", "f64"])
def test_spmm(layout: str, k: int, elt: str) -> None:
    exe = compiled(K.spmm(layout, elt))
    A = matrix((33, 21), 0.15, DTYPES[elt], 7)
    B = dense((21, k), DTYPES[elt], 8)
    close(exe(SparseTensor.from_scipy(A, layout), B), A @ B, elt)


@pytest.mark.parametrize("shape", SHAPES)
def test_spmm_shapes(shape: tuple[int, int]) -> None:
    exe = compiled(K.spmm("csr"))
    A = matrix(shape, 0.3, np.float32, 9)
    B = dense((shape[1], 19), np.float32, 10)
    close(exe(A, B), A @ B, "f32")


@pytest.mark.parametrize("k", [1, 16, 33])
@pytest.mark.parametrize("elt", ["f32", "f64"])
def test_sddmm(k: int, elt: str) -> None:
    exe = compiled(K.sddmm("csr", elt))
    S = matrix((30, 26), 0.2, DTYPES[elt], 11)
    X, Y = dense((30, k), DTYPES[elt], 12), dense((26, k), DTYPES[elt], 13)
    got = exe(S, X, Y)
    assert isinstance(got, SparseTensor)
    want = S.multiply(X @ Y.T).tocsr()
    close(got.to_dense(), want.toarray(), elt)
    np.testing.assert_array_equal(got.positions[1], S.indptr)  # S's structure, kept


@pytest.mark.parametrize("sparse_out", [False, True])
@pytest.mark.parametrize("elt", ["f32", "i32"])
@pytest.mark.parametrize("layout", ["csr", "coo", "ell"])
def test_sparse_times_dense(layout: str, elt: str, sparse_out: bool) -> None:
    exe = compiled(K.elementwise(layout, elt, sparse_out))
    A = matrix((20, 17), 0.25, DTYPES[elt], 14)
    D = dense((20, 17), DTYPES[elt], 15)
    got = exe(SparseTensor.from_scipy(A, layout), D)
    got = got.to_dense() if sparse_out else got
    close(got, A.multiply(D).toarray(), elt)


def test_sparse_plus_sparse_same_structure() -> None:
    exe = compiled(K.add_same_structure())
    A = matrix((25, 25), 0.2, np.float32, 16)
    B = A.copy()
    B.data = dense((A.nnz,), np.float32, 17)
    layout = K.layout_attr("csr", group="g")
    got = exe(SparseTensor.from_scipy(A, layout), SparseTensor.from_scipy(B, layout))
    close(got.to_dense(), (A + B).toarray(), "f32")


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("layout", ["csr", "csc", "dcsr"])
@pytest.mark.parametrize("shape", [(30, 12), (0, 4), (1, 9)])
def test_reductions(layout: str, axis: int, shape: tuple[int, int]) -> None:
    exe = compiled(K.reduce(layout, axis))
    A = matrix(shape, 0.3, np.float32, 18)
    got = exe(SparseTensor.from_scipy(A, layout))
    close(got, np.asarray(A.sum(axis=axis)).ravel(), "f32")


def test_batched_3d() -> None:
    exe = compiled(K.batched_spmv())
    rng = np.random.default_rng(19)
    dense3 = rng.standard_normal((3, 8, 6)).astype(np.float32)
    dense3[rng.random(dense3.shape) < 0.7] = 0
    A = SparseTensor.from_dense(dense3, "#sparse_iter.layout<{map = (b, i, j) -> "
                                "(b : dense, i : dense, j : compressed), "
                                "posWidth = 32, crdWidth = 32}>")  # fmt: skip
    x, y = dense((3, 6), np.float32, 20), dense((3, 8), np.float32, 21)
    close(exe(A, x, y), y + np.einsum("bij,bj->bi", dense3, x), "f32")


def test_inputs_are_not_modified() -> None:
    exe = compiled(K.spmv("csr"))
    A = matrix((10, 10), 0.3, np.float32, 22)
    x, y = dense((10,), np.float32, 23), dense((10,), np.float32, 24)
    y0, data0 = y.copy(), A.data.copy()
    exe(A, x, y)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(A.data, data0)


def test_mismatched_shapes_are_refused() -> None:
    from sparsecomp.errors import SparsecompError

    exe = compiled(K.spmv("csr"))
    A = matrix((10, 8), 0.3, np.float32, 25)
    with pytest.raises(SparsecompError, match="size"):
        exe(A, np.zeros(9, np.float32), np.zeros(10, np.float32))


@given(
    rows=st.integers(0, 40),
    cols=st.integers(0, 40),
    k=st.integers(1, 40),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_kernels_property(rows: int, cols: int, k: int, density: float, seed: int) -> None:
    """SpMV, SpMM and SDDMM agree with scipy on random shapes, densities and widths."""
    A = matrix((rows, cols), density, np.float32, seed)
    x, y = dense((cols,), np.float32, seed + 1), dense((rows,), np.float32, seed + 2)
    close(compiled(K.spmv("csr"))(A, x, y), y + A @ x, "f32")
    B = dense((cols, k), np.float32, seed + 3)
    close(compiled(K.spmm("csr"))(A, B), A @ B, "f32")
    X, Y = dense((rows, k), np.float32, seed + 4), dense((cols, k), np.float32, seed + 5)
    got = compiled(K.sddmm("csr"))(A, X, Y).to_dense()
    close(got, A.multiply(X @ Y.T).toarray() if A.nnz else np.zeros((rows, cols)), "f32")


@given(
    rows=st.integers(0, 30),
    cols=st.integers(0, 30),
    k=st.integers(1, 100),
    budget=st.sampled_from([1, 4000]),
    layout=st.sampled_from(["csr", "bsr:2x2", "bsr:4x1"]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=30, deadline=None)
def test_spmm_column_panels_property(
    rows: int, cols: int, k: int, budget: int, layout: str, seed: int
) -> None:
    """SpMM with B in column panels (panel_bytes) agrees with scipy.

    A budget of 1 byte gives panels of one vector chunk each, so wide B's
    run several panels and a ragged last one; 4000 bytes gives a panel
    width that depends on B's rows. Each panel of B is packed into a
    contiguous copy first; BSR with blocks of several rows (jammed nests)
    and rows that end inside a block (``bsr:4x1``) read it the same way.
    """
    exe = compiled(K.spmm(layout), panel_bytes=budget)
    A = matrix((rows, cols), 0.3, np.float32, seed)
    B = dense((cols, k), np.float32, seed + 1)
    close(exe(SparseTensor.from_scipy(A, layout), B), A @ B, "f32")


@given(
    rows=st.integers(0, 30),
    cols=st.integers(0, 30),
    k=st.integers(1, 70),
    per_row=st.booleans(),
    layout=st.sampled_from(["csr", "bsr:2x2", "bsr:4x1"]),
    panels=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=30, deadline=None)
def test_spmm_with_broadcast_bias_property(
    rows: int, cols: int, k: int, per_row: bool, layout: str, panels: bool, seed: int
) -> None:
    """``C = A B + bias`` (``linalg.broadcast`` into the matmul's outs) agrees with
    scipy: a bias per row starts each output chunk from its element (jammed
    BSR rows, partial block rows included); one per column (along the
    vectorized dimension) is materialized first."""
    exe = compiled(K.spmm_bias(layout, "1" if per_row else "0"), panel_bytes=1 if panels else 0)
    A = matrix((rows, cols), 0.3, np.float32, seed)
    B = dense((cols, k), np.float32, seed + 1)
    bias = dense((rows if per_row else k,), np.float32, seed + 2)
    want = A @ B + (bias[:, None] if per_row else bias[None, :])
    close(exe(SparseTensor.from_scipy(A, layout), B, bias), want, "f32")


@given(
    rows=st.integers(1, 40),
    depth=st.integers(1, 50),
    tokens=st.integers(1, 80),
    bias=st.booleans(),
    layout=st.sampled_from(
        ["csr", "ell", "dcsr", "bsr:2x2", "bsr:3x1", "bsr:4x1", "bsr:8x1", "bsr:4x4"]
    ),
    panels=st.booleans(),
    elt=st.sampled_from(["f32", "f64"]),
    bits=st.sampled_from([256, 512]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_linear_row_major_property(
    rows: int,
    depth: int,
    tokens: int,
    bias: bool,
    layout: str,
    panels: bool,
    elt: str,
    bits: int,
    seed: int,
) -> None:
    """``Y = X A^T (+ bias)`` with ``X`` and ``Y`` row-major (``Y[j, i] += A[i, k]
    X[j, k]``) agrees with scipy: ``X`` packed transposed in panels (tiles
    transposed in registers, edges masked), jammed block rows (4 and 8 rows by
    interleaves, 2 and 3 by rounds of shuffles, partial block rows and chunks
    included) and groups of eight CSR / ELL rows (a partial last group
    included) stored transposed into ``Y``, DCSR rows written a row of ``Y``
    apart; the panels in parallel."""
    dtype = np.float32 if elt == "f32" else np.float64
    exe = compiled(K.linear(layout, bias, elt), panel_bytes=512 if panels else 0, vector_bits=bits)
    A = matrix((rows, depth), 0.3, dtype, seed)
    X = dense((tokens, depth), dtype, seed + 1)
    args = [SparseTensor.from_scipy(A, layout), X]
    want = (A @ X.T).T
    if bias:
        b = dense((rows,), dtype, seed + 2)
        args.append(b)
        want = want + b[None, :]
    got = exe(*args)
    assert got.shape == (tokens, rows)
    assert got.flags.c_contiguous
    close(got, want, elt)


@pytest.mark.parametrize("layout", ["csr", "bsr:4x1"])
def test_spmm_transpose_b_upstream_syntax(layout: str) -> None:
    """``linalg.matmul`` with ``indexing_maps`` reading ``B`` transposed: ``B`` is
    packed transposed and the columns of ``C`` vectorized."""
    exe = compiled(K.spmm_transpose_b(layout))
    A = matrix((37, 45), 0.2, np.float32, 40)
    B = dense((53, 45), np.float32, 41)
    close(exe(SparseTensor.from_scipy(A, layout), B), A @ B.T, "f32")


def test_large_results_are_right() -> None:
    """Results of 4 MiB and more (huge-page advice in the kernel) hold the right values."""
    exe = compiled(K.spmm("csr"))
    A = matrix((9000, 300), 0.01, np.float32, 30)
    B = dense((300, 130), np.float32, 31)  # C: 9000 x 130 f32, 4.5 MiB
    for _ in range(2):  # the second call gets memory the first freed
        close(exe(A, B), A @ B, "f32")


def test_position_overflow_is_refused_before_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """More entries than the layout's position width can count: a clear error, no call,
    where the call converts (no variant for the operand's own 32-bit widths)."""
    from sparsecomp.errors import FormatError

    narrow = K.spmv("csr").replace("posWidth = 32,", "posWidth = 8,")
    exe = compiled(narrow)
    A = matrix((4, 100), 0.5, np.float32, 26)  # 200 entries > 127
    x, y = np.ones(100, np.float32), np.zeros(4, np.float32)
    close(exe(A, x, y), A @ x, "f32")  # the variant for scipy's int32 indices
    monkeypatch.setenv("SPARSECOMP_SPECIALIZE", "0")
    with pytest.raises(FormatError, match="overflows 8-bit positions"):
        exe(A, x, y)
    small = matrix((4, 100), 0.05, np.float32, 27)
    x, y = dense((100,), np.float32, 28), dense((4,), np.float32, 29)
    close(exe(small, x, y), y + small @ x, "f32")


POWER_ITERATION = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @power(%A: tensor<?x?xf64, #CSR>, %x0: tensor<?xf64>, %steps: index) -> tensor<?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %n = tensor.dim %x0, %c0 : tensor<?xf64>
  %r = scf.for %it = %c0 to %steps step %c1 iter_args(%v = %x0) -> (tensor<?xf64>) {
    %e = tensor.empty(%n) : tensor<?xf64>
    %f = linalg.fill ins(%z : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
    %y = linalg.matvec ins(%A, %v : tensor<?x?xf64, #CSR>, tensor<?xf64>)
                       outs(%f : tensor<?xf64>) -> tensor<?xf64>
    scf.yield %y : tensor<?xf64>
  }
  return %r : tensor<?xf64>
}
"""


@pytest.mark.parametrize("steps", [0, 1, 7])
def test_loop_yielding_a_new_tensor_each_step(steps: int) -> None:
    """x = A x in an scf.for (power iteration): each step yields a new vector, which
    one-shot bufferization refused ("Yield operand #0 is not equivalent to the
    corresponding iter bbArg") until loops may return allocations."""
    exe = compiled(POWER_ITERATION)
    a = matrix((30, 30), 0.2, np.float64, 4)
    x = np.random.default_rng(5).standard_normal(30)
    want = x.copy()
    for _ in range(steps):
        want = a @ want
    np.testing.assert_allclose(exe(a, x, steps), want, rtol=1e-12)
    np.testing.assert_array_equal(x, np.random.default_rng(5).standard_normal(30))  # untouched
