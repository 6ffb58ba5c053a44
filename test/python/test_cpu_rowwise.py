"""Row-wise kernels (new output structures, co-iteration) against scipy.

SpGEMM (``A @ B`` of two sparse matrices) and elementwise ops over two
differently structured sparse matrices: sparse outputs get a structure the
kernel computes (sorted, or not for a ``nonordered`` level), dense outputs
are updated in place. See ``sparsecomp.lowering.rowplan``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import cpu_kernels as K
from sparsecomp.errors import SparsecompError
from sparsecomp.formats import SparseTensor

pytestmark = pytest.mark.usefixtures("private_cache")


compiled = K.compiled


DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}


def matrix(shape: tuple[int, int], density: float, dtype: type, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(*shape, density=density, format="csr", random_state=rng, dtype=np.float64)
    m.data = rng.integers(-4, 5, m.nnz).astype(np.float64) if dtype == np.int32 else m.data + 0.5
    m = m.astype(dtype)
    m.eliminate_zeros()
    return m


def check_csr(got: SparseTensor, want: sp.spmatrix, tol: float, ordered: bool = True) -> None:
    """``got`` holds ``want``'s values, one entry per stored column, sorted if ``ordered``."""
    s = got.to_scipy().tocsr()
    assert s.shape == want.shape
    np.testing.assert_allclose(s.toarray(), want.toarray(), rtol=tol, atol=tol)
    ptr, idx = s.indptr, s.indices
    for r in range(s.shape[0]):
        row = idx[ptr[r] : ptr[r + 1]]
        assert len(set(row.tolist())) == len(row), f"row {r} stores a column twice"
        if ordered:
            assert np.all(np.diff(row) > 0), f"row {r} is not sorted: {row}"


SHAPES = [(30, 20, 25), (0, 4, 5), (4, 0, 5), (5, 4, 0), (1, 40, 1), (1, 1, 1), (64, 64, 64)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("elt", ["f32", "f64", "i32"])
def test_spgemm_sparse_output(shape: tuple[int, int, int], elt: str) -> None:
    m, k, n = shape
    dtype = DTYPES[elt]
    A, B = matrix((m, k), 0.2, dtype, 1), matrix((k, n), 0.2, dtype, 2)
    got = compiled(K.spgemm(elt))(A, B)
    want = (A @ B).astype(dtype)
    check_csr(got, want, 1e-4 if elt == "f32" else 1e-10)
    # The output stores exactly the structural nonzeros of A @ B (cancellation kept).
    pattern = abs(A).astype(bool).astype(np.int64) @ abs(B).astype(bool).astype(np.int64)
    assert got.to_scipy().nnz == pattern.nnz


def _order_paths(c: sp.csr_matrix) -> set[str]:
    """How ``lowering.sort.order_marked`` orders each row of ``c``: insertion sort (at
    most 32 entries), a walk over every bitmap word of the row's span (at most 4
    words of 64 columns per entry), a walk over the words its summary marks (a
    span of at most 16 summary words of 4096 columns per entry) or heapsort."""
    from sparsecomp.lowering.sort import (
        DENSE_WORDS,
        INSERTION_MAX,
        SUMMARY_WORD,
        WORD,
        WORDS_PER_ENTRY,
    )

    paths = set()
    for r in range(c.shape[0]):
        row = c.indices[c.indptr[r] : c.indptr[r + 1]]
        if len(row) <= INSERTION_MAX:
            paths.add("insertion")
        elif row.max() // WORD - row.min() // WORD + 1 <= DENSE_WORDS * len(row):
            paths.add("bitmap")
        elif row.max() // SUMMARY_WORD - row.min() // SUMMARY_WORD + 1 <= WORDS_PER_ENTRY * len(
            row
        ):
            paths.add("summary")
        else:
            paths.add("heapsort")
    return paths


def _rows(lengths: list[int], cols: int, seed: int) -> sp.csr_matrix:
    """Rows of the given lengths, at random distinct columns, values in [0.5, 1.5)."""
    rng = np.random.default_rng(seed)
    idx = [np.sort(rng.choice(cols, size=n, replace=False)) for n in lengths]
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    data = rng.random(int(ptr[-1])) + 0.5
    flat = np.concatenate(idx) if idx else np.zeros(0, np.int64)
    return sp.csr_matrix((data, flat, ptr), shape=(len(lengths), cols))


@pytest.mark.parametrize(
    ("lengths", "cols", "paths"),
    [
        # rows of about 80-150 entries over 300 columns: the bitmap
        ([100, 150, 200] * 5, 300, {"bitmap"}),
        # rows of 33-60 entries over 100000 columns (1563 words, 25 summary words): the
        # walk over the words the summary marks; short ones: insertion
        ([5, 33, 40, 60] * 5, 100_000, {"insertion", "summary"}),
        # rows of 33-40 entries spread over 3M columns (733 summary words): heapsort
        ([5, 33, 40], 3_000_000, {"insertion", "heapsort"}),
        # three ways in one output; then the walk over every word of a dense span
        ([3, 40, 180, 0, 1, 32, 33, 200, 120], 3_000_000, {"insertion", "summary", "heapsort"}),
        ([3, 150, 0, 40], 500, {"insertion", "bitmap"}),
    ],
)
def test_spgemm_long_rows_are_ordered(lengths: list[int], cols: int, paths: set[str]) -> None:
    """Each way of ordering a row gives sorted, complete rows. ``B`` has one entry per
    row, so row ``i`` of ``A @ B`` has up to ``lengths[i]`` entries spread over
    ``cols`` columns; the test checks that the paths named are taken."""
    A = _rows(lengths, 200, 3)
    B = _rows([1] * 200, cols, 4)
    want = sp.csr_matrix(A @ B)
    assert _order_paths(want) >= paths
    got = compiled(K.spgemm("f64"))(A, B)
    check_csr(got, want, 1e-10)


def test_spgemm_nonordered_output() -> None:
    A, B = matrix((50, 40), 0.1, np.float64, 5), matrix((40, 70), 0.1, np.float64, 6)
    got = compiled(K.spgemm("f64", sparse_out="nonordered"))(A, B)
    check_csr(got, A @ B, 1e-10, ordered=False)


def test_spgemm_dense_output_accumulates() -> None:
    A, B = matrix((30, 20), 0.2, np.float64, 7), matrix((20, 25), 0.2, np.float64, 8)
    C = np.random.default_rng(9).standard_normal((30, 25))
    got = compiled(K.spgemm("f64", sparse_out=""))(A, B, C)
    np.testing.assert_allclose(got, C + A @ B, rtol=1e-12)


def test_spgemm_ell_operand() -> None:
    A, B = matrix((30, 20), 0.2, np.float32, 10), matrix((20, 25), 0.2, np.float32, 11)
    got = compiled(K.spgemm("f32", a="ell", b="ell"))(
        SparseTensor.from_scipy(A, "ell"), SparseTensor.from_scipy(B, "ell")
    )
    check_csr(got, A @ B, 1e-4)


@pytest.mark.parametrize("ordered", [True, False])
def test_spgemm_two_pass_above_the_one_pass_limit(
    ordered: bool, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A product whose multiply-adds exceed ``ONE_PASS_ENTRIES`` (here patched to 5)
    takes the two-pass build at run time (count, then fill), one below it the one-pass
    build (temporaries at each block's offset, then copied): both equal scipy's. Built
    in this process (the patched limit) into a cache of the test's own."""
    import sparsecomp
    from sparsecomp.lowering import rowemit

    monkeypatch.setattr(rowemit, "ONE_PASS_ENTRIES", 5)
    monkeypatch.setenv("SPARSECOMP_COMPILE_IN_PROCESS", "1")
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    exe = sparsecomp.compile(K.spgemm("f64", sparse_out="csr" if ordered else "nonordered"))
    for shape, density in (((40, 30, 50), 0.2), ((3, 3, 3), 0.3)):
        m, k, n = shape
        A, B = matrix((m, k), density, np.float64, 21), matrix((k, n), density, np.float64, 22)
        work = int(np.diff(B.tocsr().indptr)[A.indices].sum())
        assert (work > 5) == (shape[0] == 40), work  # one case on either side of the limit
        check_csr(exe(A, B), A @ B, 1e-10, ordered=ordered)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(0, 40), k=st.integers(0, 40), n=st.integers(0, 40),
    da=st.floats(0.0, 0.6), db=st.floats(0.0, 0.6), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_spgemm_property(m: int, k: int, n: int, da: float, db: float, seed: int) -> None:
    A, B = matrix((m, k), da, np.float64, seed), matrix((k, n), db, np.float64, seed + 1)
    check_csr(compiled(K.spgemm("f64"))(A, B), A @ B, 1e-10)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("shape", [(37, 23), (0, 5), (5, 0), (1, 40), (64, 64)])
def test_merge_sparse_output(op: str, shape: tuple[int, int]) -> None:
    A, B = matrix(shape, 0.2, np.float32, 12), matrix(shape, 0.2, np.float32, 13)
    got = compiled(K.merge(op))(A, B)
    want = {"add": A + B, "sub": A - B, "mul": A.multiply(B)}[op].tocsr()
    check_csr(got, want, 1e-6)
    a, b = A.astype(bool), B.astype(bool)
    structure = a.multiply(b) if op == "mul" else (a + b)
    assert got.to_scipy().nnz == structure.nnz  # union, or intersection for mul


@pytest.mark.parametrize("op", ["add", "mul"])
def test_merge_dense_output(op: str) -> None:
    A, B = matrix((33, 21), 0.3, np.int32, 14), matrix((33, 21), 0.3, np.int32, 15)
    got = compiled(K.merge(op, "i32", sparse_out=""))(A, B)
    want = (A + B) if op == "add" else A.multiply(B)
    np.testing.assert_array_equal(got, want.toarray())


def test_merge_mixed_layouts() -> None:
    A, B = matrix((40, 30), 0.2, np.float64, 16), matrix((40, 30), 0.2, np.float64, 17)
    exe = compiled(K.merge("add", "f64", a="ell", b="csr"))
    check_csr(exe(SparseTensor.from_scipy(A, "ell"), B), A + B, 1e-12)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(0, 30), n=st.integers(0, 30), da=st.floats(0.0, 1.0), db=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16), op=st.sampled_from(["add", "mul"]),
)  # fmt: skip
def test_merge_property(m: int, n: int, da: float, db: float, seed: int, op: str) -> None:
    A, B = matrix((m, n), da, np.float64, seed), matrix((m, n), db, np.float64, seed + 1)
    want = A + B if op == "add" else A.multiply(B)
    check_csr(compiled(K.merge(op, "f64"))(A, B), want.tocsr(), 1e-12)


def test_inputs_are_not_modified() -> None:
    A, B = matrix((20, 20), 0.3, np.float64, 18), matrix((20, 20), 0.3, np.float64, 19)
    before = [x.copy() for x in (A.data, A.indices, A.indptr, B.data, B.indices, B.indptr)]
    compiled(K.spgemm("f64"))(A, B)
    after = (A.data, A.indices, A.indptr, B.data, B.indices, B.indptr)
    for x, y in zip(before, after, strict=True):
        np.testing.assert_array_equal(x, y)


def test_mismatched_inner_sizes_are_refused() -> None:
    A, B = matrix((5, 4), 0.5, np.float64, 20), matrix((3, 6), 0.5, np.float64, 21)
    with pytest.raises(SparsecompError, match="size"):
        compiled(K.spgemm("f64"))(A, B)
