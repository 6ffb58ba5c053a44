"""Guarded coordinates: kernels that check a scipy matrix's indices as they read them.

A scipy CSR (CSC) matrix reaches a kernel with the caller's own arrays, which
may change between calls. Once a function has seen a scipy operand of
``specialize.GUARD_FROM`` entries, it compiles a variant whose kernel checks
every coordinate it reads (pass ``sparse-iter-guard-coordinates``) and reports
one out of range through a status word; the runtime then checks only the
positions (O(rows)) itself. These tests lower ``GUARD_FROM`` so that small
matrices take that path, and check that results match scipy, that every
kind of bad index still raises the Python path's error (through the C path
and through Python), and that what cannot be guarded keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cpu_kernels as K
import sparsecomp
from sparsecomp.errors import FormatError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import fastcall, specialize

SPMM_UPSTREAM = K.spmm_upstream("f")

SPMV_OURS = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                            posWidth = 32, crdWidth = 32}>
func.func @f(%a: tensor<?x?xf64, #csr>, %x: tensor<?xf64>) -> tensor<?xf64> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f64
  %m = tensor.dim %a, %c0 : tensor<?x?xf64, #csr>
  %e = tensor.empty(%m) : tensor<?xf64>
  %y = linalg.fill ins(%zero : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  %0 = linalg.matvec ins(%a, %x : tensor<?x?xf64, #csr>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
"""

SPMV_CSC = """
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
func.func @f(%a: tensor<?x?xf64, #CSC>, %x: tensor<?xf64>,
             %y: tensor<?xf64>) -> tensor<?xf64> {
  %0 = linalg.matvec ins(%a, %x : tensor<?x?xf64, #CSC>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
"""

SPGEMM_UPSTREAM = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @f(%a: tensor<?x?xf64, #CSR>, %b: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf64, #CSR>
  %n = tensor.dim %b, %c1 : tensor<?x?xf64, #CSR>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #CSR>
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>)
                     outs(%e : tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR>
  return %0 : tensor<?x?xf64, #CSR>
}
"""


def _spmm(a: Any, rng: np.random.Generator) -> tuple[tuple[Any, ...], np.ndarray]:
    b = rng.standard_normal((a.shape[1], 5))
    return (a, b, np.zeros((a.shape[0], 5))), a @ b


def _spmv(a: Any, rng: np.random.Generator) -> tuple[tuple[Any, ...], np.ndarray]:
    x = rng.standard_normal(a.shape[1])
    return (a, x), a @ x


def _spmv_outs(a: Any, rng: np.random.Generator) -> tuple[tuple[Any, ...], np.ndarray]:
    x, y = rng.standard_normal(a.shape[1]), rng.standard_normal(a.shape[0])
    return (a, x, y), y + a @ x


#: name -> (program, scipy format, arguments and expected result for a matrix)
CASES = {
    "spmm upstream": (SPMM_UPSTREAM, "csr", _spmm),
    "spmv ours": (SPMV_OURS, "csr", _spmv),
    "spmv csc": (SPMV_CSC, "csc", _spmv_outs),
}


@pytest.fixture(scope="module", autouse=True)
def guard_small_matrices(private_cache: None) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(specialize, "GUARD_FROM", 1)
        yield


@pytest.fixture(scope="module")
def exes() -> dict[str, tuple[Any, Any]]:
    """Each case twice: one calls through C where it can, one never does."""
    out = {}
    for name, (program, _, _) in CASES.items():
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SPARSECOMP_NATIVE_CALLS", "0")
            python = sparsecomp.compile(program)
        out[name] = (sparsecomp.compile(program), python)
    return out


def matrix(m: int, n: int, density: float, seed: int, fmt: str, wide: bool = False) -> Any:
    a = sp.random(m, n, density=density, random_state=seed, format=fmt)
    if wide:
        a.indptr, a.indices = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    return a


def call(exe: Any, args: tuple[Any, ...], native: bool) -> Any:
    if native:
        return exe(*args)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARSECOMP_NATIVE_CALLS", "0")
        return exe(*args)


def guarded_variant(exe: Any, name: str = "f") -> Any:
    """The function's variant for scipy operands (its arguments guarded), or that of
    one of its static-size variants; None if none was compiled."""
    functions = [exe.functions[name]]
    while functions:
        function = functions.pop()
        for variant in function.specializer.variants.values():
            if variant is not None and variant.signature.status:
                return variant
        if function.sizes is not None:
            functions += [v for v in function.sizes.variants.values() if v is not None]
    return None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(sorted(CASES)),
    m=st.integers(1, 200),  # past the OpenMP chunks
    n=st.integers(1, 60),
    density=st.sampled_from([0.0, 0.05, 0.3, 1.0]),
    wide=st.booleans(),
    native=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_guarded_calls_agree_with_scipy(
    exes: dict[str, tuple[Any, Any]],
    case: str,
    m: int,
    n: int,
    density: float,
    wide: bool,
    native: bool,
    seed: int,
) -> None:
    _, fmt, make = CASES[case]
    exe = exes[case][0 if native else 1]
    a = matrix(m, n, density, seed, fmt, wide)
    args, want = make(a, np.random.default_rng(seed))
    for _ in range(3):  # the first calls compile and route, the last runs in C
        np.testing.assert_allclose(call(exe, args, native), want, rtol=1e-12, atol=1e-12)
    if a.nnz:  # an empty operand has nothing to guard (GUARD_FROM is 1)
        variant = guarded_variant(exe)
        assert variant is not None, "no guarded variant was compiled"
        assert variant.signature.args[0].guarded


BAD = ("beyond the size", "negative", "in the last row", "decreasing positions")


def _spoil(a: Any, bad: str) -> None:
    minor = a.shape[1] if a.format == "csr" else a.shape[0]
    if bad == "beyond the size":
        a.indices[0] = minor
    elif bad == "negative":
        a.indices[a.indices.shape[0] // 2] = -1
    elif bad == "in the last row":
        a.indices[-1] = minor + 1000
    else:
        a.indptr[3] = a.indptr[4] + 1


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_indices_raise(
    exes: dict[str, tuple[Any, Any]], case: str, bad: str, native: bool
) -> None:
    """An index the caller broke after calls that passed raises the careful path's
    FormatError, whichever path the call took; nothing out of range is read."""
    _, fmt, make = CASES[case]
    exe = exes[case][0 if native else 1]
    a = matrix(150, 40, 0.2, 7, fmt)
    args, want = make(a, np.random.default_rng(7))
    for _ in range(3):
        np.testing.assert_allclose(call(exe, args, native), want, rtol=1e-12, atol=1e-12)
    _spoil(a, bad)
    with pytest.raises(FormatError, match=r"index is out of range|indptr"):
        call(exe, args, native)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(sorted(CASES)),
    m=st.integers(1, 300),
    n=st.integers(1, 60),
    density=st.sampled_from([0.05, 0.3, 1.0]),
    where=st.floats(0.0, 1.0, exclude_max=True),
    value=st.sampled_from(["size", "far", "-1", "int min"]),
    seed=st.integers(0, 2**16),
)
def test_any_bad_index_raises(
    exes: dict[str, tuple[Any, Any]],
    case: str,
    m: int,
    n: int,
    density: float,
    where: float,
    value: str,
    seed: int,
) -> None:
    """One bad index anywhere (in a tile's full vectors or its masked last one, a
    first or a last row), after calls that passed, raises through the C path."""
    _, fmt, make = CASES[case]
    exe = exes[case][0]
    a = matrix(m, n, density, seed, fmt)
    assume(a.nnz > 0)
    args, want = make(a, np.random.default_rng(seed))
    for _ in range(2):
        np.testing.assert_allclose(call(exe, args, True), want, rtol=1e-12, atol=1e-12)
    minor = a.shape[1] if fmt == "csr" else a.shape[0]
    bad = {"size": minor, "far": minor + 12345, "-1": -1, "int min": np.iinfo(np.int32).min}
    a.indices[int(where * a.nnz)] = bad[value]
    with pytest.raises(FormatError, match="index is out of range"):
        call(exe, args, True)


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_entries_in_a_level_of_size_zero_raise(native: bool) -> None:
    """A guarded kernel reads an out-of-range coordinate as 0; with no columns at all
    even 0 is out of range, so the runtime refuses such a matrix before the kernel
    runs (the C path declines it) and raises."""
    exe = sparsecomp.compile(SPMV_OURS.replace("@f", f"@zero_{int(native)}"))
    function = getattr(exe, f"zero_{int(native)}")
    a = matrix(50, 20, 0.3, 5, "csr")
    args, want = _spmv(a, np.random.default_rng(5))
    for _ in range(2):
        np.testing.assert_allclose(call(function, args, native), want, rtol=1e-12)
    empty = sp.csr_matrix((a.data, a.indices, a.indptr), shape=(50, 20))
    empty._shape = (50, 0)  # what scipy's constructor would refuse
    bad = (empty, np.zeros(0))
    if native:
        kernel = guarded_variant(exe, f"zero_{int(native)}")._get_caller().native
        assert kernel.accepts(args)
        assert not kernel.accepts(bad)
    with pytest.raises(FormatError, match="out of range for size 0"):
        call(function, bad, native)


def test_the_kernel_reports_what_the_c_path_no_longer_checks() -> None:
    """The guarded kernel's C path takes a matrix whose indices it has not checked
    (``accepts``), and declines the call after the kernel set the status word: the
    call then raises through the Python path."""
    exe = sparsecomp.compile(SPMV_OURS.replace("@f", "@r"))
    a = matrix(100, 30, 0.3, 3, "csr")
    args, want = _spmv(a, np.random.default_rng(3))
    for _ in range(3):
        exe(*args)
    variant = guarded_variant(exe, "r")
    kernel = variant._get_caller().native
    assert kernel is not None
    assert fastcall.available()
    np.testing.assert_allclose(kernel(args), want, rtol=1e-12)
    a.indices[5] = 30
    assert kernel.accepts(args)  # positions only: the kernel checks the indices
    assert kernel(args) is fastcall.MISS
    with pytest.raises(FormatError, match="out of range for size 30"):
        exe(*args)
    a.indices[5] = 29
    np.testing.assert_allclose(exe(*args), a @ args[1], rtol=1e-12)


def test_spgemm_guards_both_operands() -> None:
    """SpGEMM reads B's rows at A's coordinates: those reads are not rows of the
    parallel loop, and are guarded one loop (or one read) at a time."""
    exe = sparsecomp.compile(SPGEMM_UPSTREAM)
    a, b = matrix(90, 70, 0.1, 1, "csr"), matrix(70, 50, 0.1, 2, "csr")
    for _ in range(2):
        got = exe(a, b)
        assert abs(got.to_scipy() - a @ b).max() < 1e-12
    assert guarded_variant(exe).signature.args[1].guarded
    for which, operand, size in ((1, b, 50), (0, a, 70)):
        saved = operand.indices[-1]
        operand.indices[-1] = size
        with pytest.raises(FormatError, match=f"out of range for size {size}"):
            exe(a, b)
        operand.indices[-1] = saved


def test_what_cannot_be_guarded_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    """SDDMM copies its operand's indices into its result: its variant leaves them to
    the runtime (said at INFO), and calls run it as the index-width variant they ran
    before, converting nothing; no variant is compiled twice."""
    program = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#sddmm = {indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>,
                           affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
          iterator_types = ["parallel", "parallel", "reduction"]}
func.func @f(%s: tensor<?x?xf64, #CSR>, %x: tensor<?x?xf64>,
             %y: tensor<?x?xf64>) -> tensor<?x?xf64, #CSR> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %s, %c0 : tensor<?x?xf64, #CSR>
  %n = tensor.dim %s, %c1 : tensor<?x?xf64, #CSR>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #CSR>
  %0 = linalg.generic #sddmm ins(%s, %x, %y : tensor<?x?xf64, #CSR>, tensor<?x?xf64>,
                                 tensor<?x?xf64>) outs(%e : tensor<?x?xf64, #CSR>) {
  ^bb0(%a: f64, %b: f64, %c: f64, %acc: f64):
    %p = arith.mulf %b, %c : f64
    %q = arith.mulf %a, %p : f64
    %r = arith.addf %acc, %q : f64
    linalg.yield %r : f64
  } -> tensor<?x?xf64, #CSR>
  return %0 : tensor<?x?xf64, #CSR>
}
"""
    exe = sparsecomp.compile(program)
    s = matrix(40, 30, 0.2, 5, "csr")
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((40, 8)), rng.standard_normal((30, 8))
    with caplog.at_level("INFO", logger="sparsecomp"):
        for _ in range(3):
            got = exe(s, x, y)
            assert abs(got.to_scipy() - s.multiply(x @ y.T)).max() < 1e-12
    assert "coordinates of arguments 0 on (into a result, say): the runtime checks" in caplog.text
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    compiled = [r.message for r in caplog.records if "compiled its variant" in r.message]
    assert len(compiled) == len(set(compiled)) == 2  # the size K=8, then the guard
    function = exe.functions["f"].sizes.variants[(8, 8)]  # the one calls ran
    assert not function.specializer.guardable
    assert function.specializer.decline[0] < 0  # the C path takes scipy operands again
    assert exe.functions["f"]._router((s, x, y)) is not fastcall.MISS


def test_small_operands_do_not_compile_a_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below GUARD_FROM entries the runtime's check costs less than a compile: no
    variant until a larger operand comes; from then on scipy operands go guarded."""
    monkeypatch.setattr(specialize, "GUARD_FROM", 500)
    exe = sparsecomp.compile(SPMV_OURS.replace("@f", "@g"))
    function = exe.functions["g"]
    small, large = matrix(30, 30, 0.2, 1, "csr"), matrix(100, 100, 0.1, 2, "csr")
    assert small.nnz < 500 <= large.nnz
    x = np.ones(30)
    for _ in range(3):
        np.testing.assert_allclose(exe(small, x), small @ x, rtol=1e-12)
    assert not function.specializer.variants
    assert not function.specializer.guarding
    for _ in range(3):
        np.testing.assert_allclose(exe(large, np.ones(100)), large @ np.ones(100), rtol=1e-12)
    assert function.specializer.guarding
    assert function.specializer.variants
    np.testing.assert_allclose(exe(small, x), small @ x, rtol=1e-12)


def test_a_sparse_tensor_is_not_guarded(exes: dict[str, tuple[Any, Any]]) -> None:
    """A SparseTensor was checked once, when made: it needs no guarded variant."""
    exe = sparsecomp.compile(SPMV_OURS.replace("@f", "@h"))
    a = matrix(80, 20, 0.3, 4, "csr")
    tensor = SparseTensor.from_scipy(a, "csr")
    for _ in range(3):
        np.testing.assert_allclose(exe(tensor, np.ones(20)), a @ np.ones(20), rtol=1e-12)
    assert not exe.functions["h"].specializer.variants


def test_specialize_off_checks_in_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """SPARSECOMP_SPECIALIZE=0: no variants; the runtime checks every index, and a
    bad one raises all the same."""
    monkeypatch.setenv("SPARSECOMP_SPECIALIZE", "0")
    exe = sparsecomp.compile(SPMV_OURS.replace("@f", "@k"))
    a = matrix(70, 20, 0.3, 6, "csr")
    for _ in range(3):
        np.testing.assert_allclose(exe(a, np.ones(20)), a @ np.ones(20), rtol=1e-12)
    assert not exe.functions["k"].specializer.variants
    a.indices[0] = 20
    with pytest.raises(FormatError):
        exe(a, np.ones(20))


def test_operands_to_convert_are_not_guarded() -> None:
    """A CSC or COO operand for a CSR argument is converted (and checked) anyway: no
    guarded variant for it."""
    exe = sparsecomp.compile(SPMV_OURS.replace("@f", "@c"))
    a = matrix(90, 20, 0.3, 8, "csr")
    for operand in (a.tocsc(), a.tocoo()):
        for _ in range(2):
            np.testing.assert_allclose(exe(operand, np.ones(20)), a @ np.ones(20), rtol=1e-12)
    assert guarded_variant(exe, "c") is None
