"""Layout conversions compiled for the CPU (``lowering/convert.py``), against scipy / numpy.

``set_encoding`` between layouts (CSR, CSC, COO, DCSR, ELL, BSR, n:m sources
to CSR or CSC), ``unset_encoding`` to dense, ``set_encoding`` of a dense
tensor, and the conversion ``specialize-encodings`` inserts when one matrix
is used in two layouts.
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

SOURCES = ["csr", "csc", "coo", "dcsr", "ell", "bsr:2x2", "nm:2:4"]
SHAPES = [(13, 11), (0, 4), (4, 0), (1, 9), (9, 1), (16, 16)]

LAYOUTS = {
    **K.LAYOUTS,
    "nm:2:4": "(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])",
}


def layout(name: str) -> str:
    return K.layout_attr(name, maps=LAYOUTS)


def convert_source(src: str, dst: str) -> str:
    return f"""
#S = {layout(src)}
#T = {layout(dst)}
func.func @convert(%A: tensor<?x?xf32, #S>) -> tensor<?x?xf32, #T> {{
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #S>) -> tensor<?x?xf32, #T>
  return %r : tensor<?x?xf32, #T>
}}
"""


def unset_source(src: str) -> str:
    return f"""
#S = {layout(src)}
func.func @densify(%A: tensor<?x?xf32, #S>) -> tensor<?x?xf32> {{
  %r = "sparse_iter.unset_encoding"(%A) : (tensor<?x?xf32, #S>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


def from_dense_source(dst: str) -> str:
    return f"""
#T = {layout(dst)}
func.func @pack(%D: tensor<?x?xf32>) -> tensor<?x?xf32, #T> {{
  %r = "sparse_iter.set_encoding"(%D) : (tensor<?x?xf32>) -> tensor<?x?xf32, #T>
  return %r : tensor<?x?xf32, #T>
}}
"""


def matrix(shape: tuple[int, int], density: float, seed: int, nm: bool = False) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    if nm:  # 2 of every 4 columns at most
        dense = rng.standard_normal(shape).astype(np.float32)
        cols = shape[1] - shape[1] % 4
        groups = dense[:, :cols].reshape(shape[0], cols // 4, 4)  # a view: zeroed in place
        drop = np.argsort(rng.random(groups.shape), axis=2)[:, :, :2]
        np.put_along_axis(groups, drop, 0.0, axis=2)
        dense[:, cols + 2 :] = 0.0  # the last, partial group keeps two at most
        return sp.csr_matrix(dense)
    m = sp.random(*shape, density=density, format="csr", random_state=rng, dtype=np.float32)
    m.eliminate_zeros()
    return m


def check_csr_like(got: SparseTensor, want: sp.spmatrix, dst: str) -> None:
    """Same matrix, and each row (CSR) or column (CSC) sorted with its own entries."""
    np.testing.assert_array_equal(got.to_dense(), want.toarray())
    ref = sp.csr_matrix(want) if dst == "csr" else sp.csc_matrix(want)
    ref.sort_indices()
    np.testing.assert_array_equal(got.positions[1], ref.indptr)
    np.testing.assert_array_equal(got.coordinates[1], ref.indices)


PAIRS = [(src, dst) for src in SOURCES for dst in ("csr", "csc") if src != dst]


@pytest.mark.parametrize(("src", "dst"), PAIRS)
@pytest.mark.parametrize("shape", SHAPES)
def test_layout_to_layout(src: str, dst: str, shape: tuple[int, int]) -> None:
    exe = K.compiled(convert_source(src, dst))
    A = matrix(shape, 0.3, 1, nm=src.startswith("nm"))
    got = exe(SparseTensor.from_scipy(A, src))
    assert isinstance(got, SparseTensor)
    check_csr_like(got, A, dst)


@pytest.mark.parametrize("src", SOURCES)
@pytest.mark.parametrize("shape", SHAPES)
def test_unset_encoding(src: str, shape: tuple[int, int]) -> None:
    exe = K.compiled(unset_source(src))
    A = matrix(shape, 0.3, 2, nm=src.startswith("nm"))
    got = exe(SparseTensor.from_scipy(A, src))
    np.testing.assert_array_equal(got, A.toarray())


@pytest.mark.parametrize("dst", ["csr", "csc"])
@pytest.mark.parametrize("shape", SHAPES)
def test_dense_to_layout(dst: str, shape: tuple[int, int]) -> None:
    exe = K.compiled(from_dense_source(dst))
    D = matrix(shape, 0.4, 3).toarray()
    got = exe(D)
    check_csr_like(got, sp.csr_matrix(D), dst)


@pytest.mark.parametrize(("elt", "dtype"), [("i32", np.int32), ("f64", np.float64)])
def test_element_types(elt: str, dtype: type) -> None:
    """i32 values share the coordinates' type: their buffers must stay apart."""
    exe = K.compiled(convert_source("csr", "csc").replace("xf32", f"x{elt}"))
    A = matrix((23, 19), 0.3, 5)
    A.data = np.arange(1, A.nnz + 1, dtype=np.float32)
    A = A.astype(dtype)
    check_csr_like(exe(SparseTensor.from_scipy(A, "csr")), A, "csc")


def test_explicit_zeros_are_kept() -> None:
    """A stored zero of a CSR source stays stored (only padding is dropped)."""
    exe = K.compiled(convert_source("csr", "csc"))
    A = sp.csr_matrix((np.array([0.0, 2.0], np.float32), np.array([1, 0]), np.array([0, 1, 2])),
                      shape=(2, 2))  # fmt: skip
    got = exe(SparseTensor.from_scipy(A, "csr"))
    assert got.values.size == 2


MATVEC_BOTH = """
#sparse = #sparse_iter.sparsity<unstructured, density = 0.01>
#AT = affine_map<(j, i) -> (i, j)>
func.func @both(%A: tensor<?x?xf32, #sparse>, %x: tensor<?xf32>, %z: tensor<?xf32>)
    -> (tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #sparse>
  %n = tensor.dim %A, %c1 : tensor<?x?xf32, #sparse>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %y = linalg.matvec ins(%A, %x : tensor<?x?xf32, #sparse>, tensor<?xf32>)
                     outs(%y0 : tensor<?xf32>) -> tensor<?xf32>
  %e2 = tensor.empty(%n) : tensor<?xf32>
  %w0 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?xf32>) -> tensor<?xf32>
  %w = linalg.generic {indexing_maps = [#AT, affine_map<(j, i) -> (i)>, affine_map<(j, i) -> (j)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %z : tensor<?x?xf32, #sparse>, tensor<?xf32>) outs(%w0 : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %y, %w : tensor<?xf32>, tensor<?xf32>
}
"""


@given(
    rows=st.integers(0, 60),
    cols=st.integers(0, 60),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=30, deadline=None)
def test_one_matrix_in_two_layouts(rows: int, cols: int, density: float, seed: int) -> None:
    """A x and A^T z in one function: the resolver reads A as CSR and as CSC (a conversion)."""
    exe = K.compiled(MATVEC_BOTH)
    A = matrix((rows, cols), density, seed)
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal(cols).astype(np.float32)
    z = rng.standard_normal(rows).astype(np.float32)
    y, w = exe(A, x, z)
    np.testing.assert_allclose(y, A @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w, A.T @ z, rtol=1e-4, atol=1e-4)


@given(
    pair=st.sampled_from(PAIRS),
    rows=st.integers(0, 40),
    cols=st.integers(0, 40),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_conversion_property(
    pair: tuple[str, str], rows: int, cols: int, density: float, seed: int
) -> None:
    src, dst = pair
    exe = K.compiled(convert_source(src, dst))
    A = matrix((rows, cols), density, seed, nm=src.startswith("nm"))
    check_csr_like(exe(SparseTensor.from_scipy(A, src)), A, dst)


def test_ell_target_goes_upstream_as_csr() -> None:
    """ELL has no #sparse_tensor form: the upstream function holds it as CSR, same values."""
    exe = K.compiled(convert_source("csr", "ell"))
    A = matrix((17, 12), 0.3, 5)
    got = exe(SparseTensor.from_scipy(A, "csr"))
    np.testing.assert_array_equal(got.to_dense(), A.toarray())


def test_other_targets_go_upstream() -> None:
    """CSR -> COO is not ours to lower; the upstream sparsifier converts it."""
    exe = K.compiled(convert_source("csr", "coo"))
    A = matrix((17, 12), 0.3, 4)
    got = exe(SparseTensor.from_scipy(A, "csr"))
    np.testing.assert_array_equal(got.to_dense(), A.toarray())
