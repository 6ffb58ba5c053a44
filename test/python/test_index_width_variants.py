"""Calls whose sparse operands have other index widths than the kernel's (runtime/specialize.py).

Programs are written the way upstream's sparse tests are: ``#sparse_tensor.encoding``
without widths (index-typed positions and coordinates), ``outs`` operands the
caller passes. Every result is checked against scipy.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpu_kernels as K
import sparsecomp
from sparsecomp.formats import SparseTensor, parse_layout
from sparsecomp.runtime.specialize import operand_layout

SPMM = K.spmm_upstream()

# C = A + B with both operands of one type: a variant must give both the same widths.
ADD = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#add = {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                         affine_map<(i, j) -> (i, j)>],
        iterator_types = ["parallel", "parallel"]}
func.func @add(%a: tensor<?x?xf64, #CSR>, %b: tensor<?x?xf64, #CSR>,
               %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %0 = linalg.generic #add ins(%a, %b : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>)
                           outs(%c : tensor<?x?xf64>) {
  ^bb0(%x: f64, %y: f64, %o: f64):
    %s = arith.addf %x, %y : f64
    linalg.yield %s : f64
  } -> tensor<?x?xf64>
  return %0 : tensor<?x?xf64>
}
"""


@pytest.fixture(scope="module")
def spmm(private_cache: None) -> Any:
    """The upstream-syntax SpMM, its index-width variants only (sizes stay dynamic)."""
    exe = sparsecomp.compile(SPMM)
    exe.functions["spmm"].sizes = None
    return exe


@pytest.fixture(scope="module")
def spmm_sized(private_cache: None) -> Any:
    """The same SpMM with its variants for dense sizes too (as compile() gives it)."""
    return sparsecomp.compile(SPMM)


def _matrix(seed: int, index: Any = np.int32, shape: tuple[int, int] = (40, 30)) -> Any:
    m = sp.random(*shape, density=0.15, format="csr", random_state=seed, dtype=np.float64)
    m.indptr, m.indices = m.indptr.astype(index), m.indices.astype(index)
    return m


def test_scipy_int32_compiles_one_variant(spmm: Any, caplog: pytest.LogCaptureFixture) -> None:
    a, b = _matrix(1), np.random.default_rng(1).random((30, 5))
    c = np.random.default_rng(2).random((40, 5))
    keep = c.copy()
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        got = spmm(a, b, c)
    np.testing.assert_allclose(got, c + a @ b, rtol=1e-12)
    np.testing.assert_array_equal(c, keep)  # the outs operand is read, never written
    assert any("compiled its variant" in r.getMessage() for r in caplog.records)
    specializer = spmm.functions["spmm"].specializer
    assert len(specializer.variants) == 1
    (variant,) = specializer.variants.values()
    assert variant.signature.args[0].layout.pos_width == 32
    # the same widths again, from scipy or a SparseTensor: the same variant, no compile
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        np.testing.assert_allclose(spmm(_matrix(3), b, c), c + _matrix(3) @ b, rtol=1e-12)
        t = SparseTensor.from_scipy(a, "csr")
        np.testing.assert_allclose(spmm(t, b, c), c + a @ b, rtol=1e-12)
    assert not caplog.records
    assert len(specializer.variants) == 1


# SpMV that also counts A's entries: a sparse_tensor op sends it to the upstream sparsifier.
SPMV_COUNTED = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @spmv(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>,
                %y: tensor<?xf64>) -> (tensor<?xf64>, index) {
  %n = sparse_tensor.number_of_entries %a : tensor<?x?xf64, #CSR>
  %0 = linalg.matvec ins(%a, %x : tensor<?x?xf64, #CSR>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %0, %n : tensor<?xf64>, index
}
"""


def test_upstream_road_takes_a_width_variant(
    private_cache: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A function the upstream sparsifier compiles gets its width variant through its
    #sparse_tensor.encoding's widths: no conversion, no warning."""
    exe = sparsecomp.compile(SPMV_COUNTED)
    a, x = _matrix(5), np.random.default_rng(5).random(30)
    y = np.random.default_rng(6).random(40)
    with caplog.at_level(logging.INFO, logger="sparsecomp"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConversionWarning would fail the test
        got, count = exe(a, x, y)
    np.testing.assert_allclose(got, y + a @ x, rtol=1e-12)
    assert count == a.nnz
    assert "compiled its variant for the operands' index widths" in caplog.text
    (variant,) = exe.functions["spmv"].specializer.variants.values()
    assert variant.signature.args[0].layout.pos_width == 32


# A plain SpMV that a main() with sparse_tensor.convert calls: both go upstream together.
SPMV_CALLED = """
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
func.func @spmv(%a: tensor<?x?xf64, #CSC>, %x: tensor<?xf64>, %y: tensor<?xf64>) -> tensor<?xf64> {
  %0 = linalg.matvec ins(%a, %x : tensor<?x?xf64, #CSC>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
func.func @main() {
  %d = arith.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf64>
  %s = tensor.cast %d : tensor<2x2xf64> to tensor<?x?xf64>
  %a = sparse_tensor.convert %s : tensor<?x?xf64> to tensor<?x?xf64, #CSC>
  %x = arith.constant dense<1.0> : tensor<2xf64>
  %xs = tensor.cast %x : tensor<2xf64> to tensor<?xf64>
  %r = call @spmv(%a, %xs, %xs)
      : (tensor<?x?xf64, #CSC>, tensor<?xf64>, tensor<?xf64>) -> tensor<?xf64>
  return
}
"""


def test_callee_of_an_upstream_main_takes_a_width_variant(private_cache: None) -> None:
    """The function a main() with sparse_tensor ops calls goes upstream with it; its width
    variant retypes both, so scipy's int32 CSC arrays are taken without a conversion."""
    exe = sparsecomp.compile(SPMV_CALLED)
    a = _matrix(7).tocsc()
    x, y = np.random.default_rng(7).random(30), np.random.default_rng(8).random(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConversionWarning would fail the test
        got = exe.spmv(a, x, y)
    np.testing.assert_allclose(got, y + a @ x, rtol=1e-12)
    (variant,) = exe.functions["spmv"].specializer.variants.values()
    assert variant.signature.args[0].layout.pos_width == 32


WRAPPED_SPMV = """
#CSR = ENCODING
func.func private @spmv(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>, %y: tensor<?xf64>)
    -> tensor<?xf64> {
  %r = linalg.matvec ins(%a, %x : tensor<?x?xf64, #CSR>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %r : tensor<?xf64>
}
func.func @k(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>, %y: tensor<?xf64>) -> tensor<?xf64> {
  %r = call @spmv(%a, %x, %y) : (tensor<?x?xf64, #CSR>, tensor<?xf64>, tensor<?xf64>)
      -> tensor<?xf64>
  return %r : tensor<?xf64>
}
"""


@pytest.mark.parametrize(
    "encoding",
    [
        "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>",
        "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>",
    ],
)
def test_function_with_a_callee_takes_a_width_variant(private_cache: None, encoding: str) -> None:
    """A public kernel passing its matrix to a private callee (sparse_iter's road): the
    variant retypes both; a rule on the argument alone left the call mismatched, the
    variant failed to compile and every call converted scipy's int32 arrays."""
    exe = sparsecomp.compile(WRAPPED_SPMV.replace("ENCODING", encoding))
    a = _matrix(11)
    x, y = np.random.default_rng(1).random(30), np.random.default_rng(2).random(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConversionWarning would fail the test
        got = exe.k(a, x, y)
    np.testing.assert_allclose(got, y + a @ x, rtol=1e-12)
    (variant,) = exe.functions["k"].specializer.variants.values()
    assert variant is not None
    assert variant.signature.args[0].layout.pos_width == 32


def test_kernel_widths_need_no_variant(spmm: Any) -> None:
    a, b = _matrix(4, np.int64), np.ones((30, 3))
    c = np.zeros((40, 3))
    specializer = spmm.functions["spmm"].specializer
    before = dict(specializer.variants)
    np.testing.assert_allclose(spmm(a, b, c), a @ b, rtol=1e-12)
    assert specializer.variants == before


def test_shared_type_takes_one_rule(private_cache: None) -> None:
    add = sparsecomp.compile(ADD)
    a, b, c = _matrix(5), _matrix(6), np.ones((40, 30))
    np.testing.assert_allclose(add(a, b, c), (a + b).toarray(), rtol=1e-12)
    ((rules, guards),) = add.functions["add"].specializer.variants
    assert [i for i, _ in rules] == [0, 1]
    assert not guards


def test_mixed_widths_of_one_type_take_a_variant(private_cache: None) -> None:
    """Two operands of one type in different widths (scipy int32 and int64): the
    variant gives the one that differs its own layout, for each use of it takes any
    encoding (a linalg input), and no call converts."""
    add = sparsecomp.compile(ADD)
    a, b, c = _matrix(7), _matrix(8, np.int64), np.zeros((40, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConversionWarning would fail the test
        got = add(a, b, c)
        again = add(a, b, c)
    np.testing.assert_allclose(got, (a + b).toarray(), rtol=1e-12)
    np.testing.assert_array_equal(got, again)
    ((rules, _),) = add.functions["add"].specializer.variants
    assert [i for i, _ in rules] == [0]


SPGEMM = """
#CSR = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32,
                            crdWidth = 32}>
func.func @spgemm(%a: tensor<?x?xf32, #CSR>, %b: tensor<?x?xf32, #CSR>) -> tensor<?x?xf32, #CSR> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32, #CSR>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32, #CSR>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #CSR>
  %c = linalg.matmul ins(%a, %b : tensor<?x?xf32, #CSR>, tensor<?x?xf32, #CSR>)
                     outs(%e : tensor<?x?xf32, #CSR>) -> tensor<?x?xf32, #CSR>
  return %c : tensor<?x?xf32, #CSR>
}
"""


def test_spgemm_with_one_int64_operand_takes_a_variant(private_cache: None) -> None:
    """SpGEMM (32-bit CSR operands and result) called with A in int64 indices: A alone
    takes 64-bit widths; B and the result keep the program's."""
    exe = sparsecomp.compile(SPGEMM)
    a = _matrix(3, shape=(50, 40)).astype(np.float32)
    a.indptr, a.indices = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    b = _matrix(4, shape=(40, 60)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ConversionWarning would fail the test
        got = exe.spgemm(a, b)
    np.testing.assert_allclose(got.to_scipy().toarray(), (a @ b).toarray(), rtol=1e-5)
    assert got.layout.pos_width == 32
    ((rules, _),) = exe.functions["spgemm"].specializer.variants
    assert [i for i, _ in rules] == [0]


WRAPPED_ADD = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func private @inner(%a: tensor<?x?xf64, #CSR>, %b: tensor<?x?xf64, #CSR>,
                         %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %0 = linalg.add ins(%a, %b : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>)
                  outs(%c : tensor<?x?xf64>) -> tensor<?x?xf64>
  return %0 : tensor<?x?xf64>
}
func.func @add(%a: tensor<?x?xf64, #CSR>, %b: tensor<?x?xf64, #CSR>,
               %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %0 = call @inner(%a, %b, %c)
      : (tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>, tensor<?x?xf64>) -> tensor<?x?xf64>
  return %0 : tensor<?x?xf64>
}
"""


def test_mixed_widths_passed_on_convert(
    private_cache: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Mixed widths of one type where the operands go on to a call (whose type both
    share): no variant; calls convert, and the failed variant is not tried again."""
    add = sparsecomp.compile(WRAPPED_ADD)
    a, b, c = _matrix(7), _matrix(8, np.int64), np.zeros((40, 30))
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        got = add(a, b, c)
        again = add(a, b, c)
    np.testing.assert_allclose(got, (a + b).toarray(), rtol=1e-12)
    np.testing.assert_array_equal(got, again)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1  # remembered: no second attempt
    assert "no variant" in warned[0].getMessage()


def test_switched_off_or_loaded_executables_convert(
    spmm: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    a, b, c = _matrix(9), np.ones((30, 2)), np.zeros((40, 2))
    loaded = sparsecomp.load(spmm.save(tmp_path / "spmm"))
    assert loaded.functions["spmm"].specializer is None
    np.testing.assert_allclose(loaded(a, b, c), a @ b, rtol=1e-12)
    monkeypatch.setenv("SPARSECOMP_SPECIALIZE", "0")
    assert spmm.functions["spmm"].specializer.pick((a, b, c)) is None
    np.testing.assert_allclose(spmm(a, b, c), a @ b, rtol=1e-12)


def test_operand_layout() -> None:
    index = parse_layout("csr").with_widths(0, 0)
    narrow = parse_layout("csr")
    assert operand_layout(index, _matrix(1)) == narrow
    assert operand_layout(index, _matrix(1, np.int64)) is None  # index is 64-bit
    assert operand_layout(narrow, _matrix(1, np.int64)) == narrow.with_widths(64, 64)
    assert operand_layout(index, _matrix(1).tocsc()) is None  # converted anyway
    assert operand_layout(index, SparseTensor.from_scipy(_matrix(1), "csr")) == narrow
    assert operand_layout(index, SparseTensor.from_scipy(_matrix(1), "csc")) is None
    assert operand_layout(index, np.ones((2, 2))) is None
    # converted operands: a variant only where the declared widths cannot hold them
    tiny = parse_layout("csr").with_widths(8, 8)
    assert operand_layout(tiny, sp.random(100, 90, density=0.01, format="coo")) is None
    wide = sp.random(300, 90, density=0.004, format="coo")  # 300 rows: past 8 bits
    assert operand_layout(tiny, wide) == tiny.with_widths(8, 32)
    many = sp.random(40, 40, density=0.2, format="csc")  # 320 entries: past 8 bits
    assert operand_layout(tiny, many) == tiny.with_widths(32, 8)
    assert operand_layout(tiny, SparseTensor.from_scipy(wide, "csc")) == tiny.with_widths(8, 32)


NARROW_MATVEC = """
#E = #sparse_tensor.encoding<{ map = (i, j) -> LEVELS, posWidth = 8, crdWidth = 8 }>
func.func @mv(%a: tensor<?x?xf32, #E>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.matvec ins(%a, %x : tensor<?x?xf32, #E>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


@pytest.mark.parametrize(
    "levels", ["(i : dense, j : compressed)", "(i : compressed(nonunique), j : singleton)"]
)
def test_converted_operands_past_narrow_widths_take_a_wide_variant(
    levels: str, private_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8-bit widths declared, a 500x500 operand of another format: the conversion goes to
    a variant at widths that hold it, as a CSR operand in the kernel's own format always
    did (COO operands, and every operand of a COO kernel, were refused)."""
    exe = sparsecomp.compile(NARROW_MATVEC.replace("LEVELS", levels))
    a = sp.random(500, 500, density=0.01, format="coo", random_state=4, dtype=np.float32)
    x = np.arange(500, dtype=np.float32) / 500
    for operand in (a, a.tocsr(), a.tocsc(), SparseTensor.from_scipy(a, "csc")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the conversion's one-time warning
            got = exe(operand, x, np.zeros(500, np.float32))
        np.testing.assert_allclose(got, a @ x, rtol=1e-5)
    small = sp.random(50, 50, density=0.1, format="coo", random_state=5, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = exe(small, x[:50], np.zeros(50, np.float32))
    np.testing.assert_allclose(got, small @ x[:50], rtol=1e-5)
    monkeypatch.setenv("SPARSECOMP_SPECIALIZE", "0")
    with pytest.raises(sparsecomp.errors.FormatError, match="does not fit 8-bit coordinates"):
        exe(a.tocsc(), x, np.zeros(500, np.float32))


def test_wide_variant_rules_follow_the_operands_size(
    private_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16-bit widths declared: a COO operand with 200 columns fits them, one of the same
    kind with 40000 does not; the rule remembered for the first must not serve the
    second (its conversion was refused: "does not fit 16-bit coordinates")."""
    exe = sparsecomp.compile(
        NARROW_MATVEC.replace("LEVELS", "(i : dense, j : compressed)").replace(" = 8", " = 16")
    )
    for n in (200, 40_000):
        a = sp.random(50, n, density=10 / n, format="coo", random_state=n, dtype=np.float32)
        x = np.arange(n, dtype=np.float32) / n
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the conversion's one-time warning
            got = exe(a, x, np.zeros(50, np.float32))
        np.testing.assert_allclose(got, a @ x, rtol=1e-5)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.integers(0, 12),
    cols=st.integers(1, 9),
    k=st.integers(1, 4),
    density=st.floats(0.0, 1.0),
    index=st.sampled_from([np.int32, np.int64]),
    as_tensor=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_widths_match_scipy(
    spmm: Any,
    rows: int,
    cols: int,
    k: int,
    density: float,
    index: Any,
    as_tensor: bool,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    a = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    a.indptr, a.indices = a.indptr.astype(index), a.indices.astype(index)
    b, c = rng.random((cols, k)), rng.random((rows, k))
    arg = (
        SparseTensor.from_scipy(
            a,
            parse_layout("csr").with_widths(
                8 * np.dtype(index).itemsize, 8 * np.dtype(index).itemsize
            ),
        )
        if as_tensor
        else a
    )
    np.testing.assert_allclose(spmm(arg, b, c), c + a @ b, rtol=1e-12, atol=1e-12)


# -- dense sizes: K made static at the first call (SizeSpecializer) -----------------------------

SDDMM = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @sddmm(%s: tensor<?x?xf64, #CSR>, %x: tensor<?x?xf64>,
                 %y: tensor<?x?xf64>) -> tensor<?x?xf64, #CSR> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %s, %c0 : tensor<?x?xf64, #CSR>
  %n = tensor.dim %s, %c1 : tensor<?x?xf64, #CSR>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #CSR>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j)>,
                                        affine_map<(i, j, k) -> (i, k)>,
                                        affine_map<(i, j, k) -> (j, k)>,
                                        affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%s, %x, %y : tensor<?x?xf64, #CSR>, tensor<?x?xf64>, tensor<?x?xf64>)
      outs(%e : tensor<?x?xf64, #CSR>) {
  ^bb0(%a: f64, %b: f64, %c: f64, %o: f64):
    %p = arith.mulf %b, %c : f64
    %q = arith.mulf %a, %p : f64
    %t = arith.addf %o, %q : f64
    linalg.yield %t : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}
"""


def test_sizes_that_can_be_static() -> None:
    from sparsecomp.runtime.specialize import static_candidates

    spmm = sparsecomp.compile(SPMM)
    # B's and C's K; not A's dimensions, which every matrix changes
    assert static_candidates(spmm.functions["spmm"].signature) == ((1, 1), (2, 1))


def test_first_call_makes_k_static(spmm_sized: Any, caplog: pytest.LogCaptureFixture) -> None:
    spmm = spmm_sized
    a = _matrix(11, np.int64)  # no width variant: only the sizes
    b, c = np.random.default_rng(4).random((30, 16)), np.random.default_rng(5).random((40, 16))
    sizes = spmm.functions["spmm"].sizes
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        np.testing.assert_allclose(spmm(a, b, c), c + a @ b, rtol=1e-12)
    variant = sizes.variants[(16, 16)]
    assert [spec.shape[1] for spec in variant.signature.args[1:]] == [16, 16]
    assert any("sizes" in r.getMessage() for r in caplog.records)
    assert "vector.create_mask" not in _stage(variant, "loops.mlir")  # lengths known
    assert "memcpy" not in _stage(variant, "llvm.mlir")  # C read in place, through its cast
    # another K: another variant; a K past MAX_STATIC: the dynamic kernel
    b2, c2 = np.ones((30, 3)), np.zeros((40, 3))
    np.testing.assert_allclose(spmm(a, b2, c2), a @ b2, rtol=1e-12)
    assert (3, 3) in sizes.variants


def _stage(function: Any, name: str) -> str:
    """A stage's IR of the executable a (variant) function belongs to."""
    return (function.directory / name).read_text()


def test_big_or_mismatched_sizes_stay_dynamic(
    spmm_sized: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spmm = spmm_sized
    from sparsecomp.runtime import specialize

    monkeypatch.setattr(specialize, "MAX_STATIC", 4)
    sizes = spmm.functions["spmm"].sizes
    before = dict(sizes.variants)
    a, b, c = _matrix(12, np.int64), np.ones((30, 5)), np.zeros((40, 5))
    np.testing.assert_allclose(spmm(a, b, c), a @ b, rtol=1e-12)
    assert sizes.variants == before
    with pytest.raises(sparsecomp.SparsecompError, match="size symbol"):
        spmm(a, np.ones((30, 2)), np.zeros((40, 3)))  # the careful path's error, unchanged


def test_static_k_variant_checks_every_size(private_cache: None) -> None:
    """A static-K variant passes its K operands on through a ``tensor.cast``: the
    sizes that must match across them (C's rows and A's, X's rows and S's) are
    still checked before the call, on the C path too. They once were not: a C
    one row short made the kernel write past it."""
    spmm = sparsecomp.compile(SPMM)
    a, b, c = _matrix(13, np.int32), np.ones((30, 8)), np.ones((40, 8))
    for _ in range(3):  # the static-K variant, then calls routed to it in C
        np.testing.assert_allclose(spmm(a, b, c), c + a @ b, rtol=1e-12)
    variant = spmm.functions["spmm"].sizes.variants[(8, 8)]
    a_rows, c_rows = variant.signature.args[0].shape[0], variant.signature.args[2].shape[0]
    assert isinstance(a_rows, str)
    assert a_rows == c_rows
    for rows in (39, 41, 4000):
        with pytest.raises(sparsecomp.SparsecompError, match="size symbol"):
            spmm(a, b, np.ones((rows, 8)))
    sddmm = _sddmm()
    rng = np.random.default_rng(14)
    s = sp.random(20, 10, density=0.3, format="csr", random_state=14)
    x, y = rng.random((20, 16)), rng.random((10, 16))
    for _ in range(3):
        got = sddmm(s, x, y).to_scipy().toarray()
    np.testing.assert_allclose(got, s.multiply(x @ y.T).toarray(), rtol=1e-12)
    with pytest.raises(sparsecomp.SparsecompError, match="size symbol"):
        sddmm(s, rng.random((19, 16)), y)
    with pytest.raises(sparsecomp.SparsecompError, match="size symbol"):
        sddmm(s, x, rng.random((9, 16)))


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.integers(0, 9),
    cols=st.integers(1, 8),
    k=st.sampled_from([1, 3, 8, 9, 16, 33]),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_static_k_sddmm_matches_scipy(
    private_cache: None, rows: int, cols: int, k: int, density: float, seed: int
) -> None:
    exe = _sddmm()
    rng = np.random.default_rng(seed)
    s = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    x, y = rng.random((rows, k)), rng.random((cols, k))
    got = exe(s, x, y).to_scipy().toarray()
    np.testing.assert_allclose(got, s.multiply(x @ y.T).toarray(), rtol=1e-12, atol=1e-12)


_SDDMM: list[Any] = []


def _sddmm() -> Any:
    if not _SDDMM:
        _SDDMM.append(sparsecomp.compile(SDDMM))
    return _SDDMM[0]
