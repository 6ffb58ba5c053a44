"""``out=``: results written into arrays the caller owns (runtime/destinations.py).

A call with ``out=`` compiles a variant of the function whose kernel builds
the result in the caller's array (passes ``sparse-iter-destinations`` and
``sparse-iter-drop-destination-results``); an ``out`` array that is the
function's own ``outs`` operand is accumulated in place. These tests check the
numbers against scipy, that the variant really writes the array (no result
returned, no copy in its IR), what is refused before any native code runs,
and that the calls a variant cannot take (overlapping arrays, a loaded
executable) still fill ``out`` by copying.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpu_kernels as K
import sparsecomp
from sparsecomp.errors import ArgumentError, FormatError, SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import specialize

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

#: two results: A x and a copy of x doubled (a dense result of another shape)
TWO_RESULTS = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                            posWidth = 32, crdWidth = 32}>
#map = affine_map<(i) -> (i)>
func.func @f(%a: tensor<?x?xf64, #csr>, %x: tensor<?xf64>) -> (tensor<?xf64>, tensor<?xf64>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f64
  %m = tensor.dim %a, %c0 : tensor<?x?xf64, #csr>
  %e = tensor.empty(%m) : tensor<?xf64>
  %y = linalg.fill ins(%zero : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  %0 = linalg.matvec ins(%a, %x : tensor<?x?xf64, #csr>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  %c1 = arith.constant 1 : index
  %n = tensor.dim %x, %c0 : tensor<?xf64>
  %e2 = tensor.empty(%n) : tensor<?xf64>
  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf64>) outs(%e2 : tensor<?xf64>) {
    ^bb0(%v: f64, %o: f64):
      %s = arith.addf %v, %v : f64
      linalg.yield %s : f64
  } -> tensor<?xf64>
  return %0, %1 : tensor<?xf64>, tensor<?xf64>
}
"""

SPGEMM = """
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


@pytest.fixture(scope="module")
def spmm(private_cache: None) -> Any:
    return sparsecomp.compile(SPMM_UPSTREAM)


@pytest.fixture(scope="module")
def spmv(private_cache: None) -> Any:
    return sparsecomp.compile(SPMV_OURS)


def _matrix(m: int, n: int, density: float, seed: int, index: type = np.int32) -> sp.csr_matrix:
    a = sp.random(m, n, density=density, format="csr", dtype=np.float64, random_state=seed)
    a.indices, a.indptr = a.indices.astype(index), a.indptr.astype(index)
    return a


def _variant(exe: Any) -> tuple[Any, Any]:
    """The function and signature of the only out= variant the function compiled."""
    (variant,) = exe.functions["f"]._destinations._variants.values()
    assert not isinstance(variant, str), variant
    return variant[0], variant[0].signature


def _llvm_ir(call: Any) -> str:
    """The LLVM-dialect stage of a variant's kernel (``Function`` of its executable)."""
    return (call.directory / "llvm.mlir").read_text()


def test_spmv_writes_into_out(spmv: Any) -> None:
    a, x = _matrix(70, 50, 0.1, 1), np.random.default_rng(1).random(50)
    y = np.full(70, np.nan)
    got = spmv(a, x, out=y)
    assert got is y
    np.testing.assert_allclose(y, a @ x, rtol=1e-12, atol=1e-12)
    call, sig = _variant(spmv)
    assert sig.results == ()
    assert sig.destinations == ((0, 2),)
    ir = _llvm_ir(call)  # the kernel writes the caller's array: nothing to allocate or copy
    assert "malloc" not in ir
    assert "memcpy" not in ir
    assert "memref.copy" not in ir


def test_outs_operand_accumulates_in_place(spmm: Any) -> None:
    rng = np.random.default_rng(2)
    a, b = _matrix(40, 30, 0.2, 2), rng.random((30, 8))
    c = rng.random((40, 8))
    expected = c + a @ b
    got = spmm(a, b, c, out=c)
    assert got is c
    np.testing.assert_allclose(c, expected, rtol=1e-12)
    _, sig = _variant(spmm)
    assert sig.destinations == ((0, 2),)
    assert len(sig.args) == 3
    spmm(a, b, c, out=c)  # again: the same variant, C accumulated twice
    np.testing.assert_allclose(c, expected + a @ b, rtol=1e-12)
    assert len(spmm.functions["f"]._destinations._variants) == 1


def _new_kernels(before: set[Path]) -> list[Path]:
    return sorted(set(_kernels()) - before)


def _kernels() -> list[Path]:
    return list(Path(os.environ["SPARSECOMP_CACHE_DIR"]).glob("kernels/*"))


@pytest.mark.parametrize("in_place", [True, False])
def test_every_kernel_a_call_runs_writes_out_itself(private_cache: None, in_place: bool) -> None:
    """The out= variant and the variants made from it for the call (a static K, the
    scipy operand's index widths) all build the result in out: none allocates or copies."""
    before = set(_kernels())
    exe = sparsecomp.compile(SPMM_UPSTREAM.replace("@f", "@g"))  # a program of its own
    rng = np.random.default_rng(10)
    a, b, c = _matrix(64, 48, 0.2, 10), rng.random((48, 16)), rng.random((64, 16))
    expected = c + a @ b
    out = c if in_place else np.empty((64, 16))
    exe(a, b, c, out=out)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    made = [
        k for k in _new_kernels(before) if '"destinations"' in (k / "manifest.json").read_text()
    ]
    assert len(made) >= 3  # the out= variant, its static-K variant, that one's width variant
    for kernel in made:
        ir = (kernel / "llvm.mlir").read_text()
        assert "malloc" not in ir, kernel
        assert "memref.copy" not in ir, kernel


def test_new_destination_leaves_the_outs_operand(spmm: Any) -> None:
    rng = np.random.default_rng(3)
    a, b, c = _matrix(33, 21, 0.3, 3), rng.random((21, 5)), rng.random((33, 5))
    kept = c.copy()
    d = np.empty((33, 5))
    assert spmm(a, b, c, out=d) is d
    np.testing.assert_allclose(d, c + a @ b, rtol=1e-12)
    np.testing.assert_array_equal(c, kept)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    m=st.integers(1, 150),
    n=st.integers(1, 60),
    k=st.integers(1, 20),
    density=st.floats(0.0, 0.5),
    in_place=st.booleans(),
    wide=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_spmm_out_matches_scipy(
    spmm: Any, m: int, n: int, k: int, density: float, in_place: bool, wide: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = _matrix(m, n, density, seed, np.int64 if wide else np.int32)
    b, c = rng.random((n, k)), rng.random((m, k))
    expected = c + a @ b
    out = c if in_place else np.full((m, k), np.nan)
    assert spmm(a, b, c, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_guarded_and_sparse_tensor_operands(
    spmm: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The out= variant has variants of its own: the guarded one for the scipy
    operand's arrays (its kernel checks the indices), and SparseTensors pass."""
    monkeypatch.setattr(specialize, "GUARD_FROM", 1)
    exe = sparsecomp.compile(SPMM_UPSTREAM)
    rng = np.random.default_rng(4)
    a, b = _matrix(120, 40, 0.1, 4), rng.random((40, 6))
    for operand in (a, SparseTensor.from_scipy(a, "csr")):
        d = np.empty((120, 6))
        with caplog.at_level(logging.INFO, logger="sparsecomp"):
            exe(operand, b, np.zeros((120, 6)), out=d)
        np.testing.assert_allclose(d, a @ b, rtol=1e-12)
    assert "for out= (result 0 into a new argument)" in caplog.text
    assert "variant for scipy operands' own arrays" in caplog.text
    bad = a.copy()
    bad.indices[3] = 40  # beyond the columns: still caught
    with pytest.raises(FormatError):
        exe(bad, b, np.zeros((120, 6)), out=np.empty((120, 6)))


def test_several_results(private_cache: None) -> None:
    exe = sparsecomp.compile(TWO_RESULTS)
    a, x = _matrix(12, 9, 0.4, 5), np.random.default_rng(5).random(9)
    y = np.empty(12)
    got_y, doubled = exe(a, x, out=(y, None))
    assert got_y is y
    np.testing.assert_allclose(y, a @ x, rtol=1e-12)
    np.testing.assert_allclose(doubled, 2 * x)
    z = np.empty(9)
    got_y, got_z = exe(a, x, out=(None, z))
    assert got_z is z
    np.testing.assert_allclose(got_y, a @ x, rtol=1e-12)
    np.testing.assert_allclose(z, 2 * x)


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (np.empty((39, 8)), r"size 39 in dimension 0, expected 40 \(from argument 0 dimension 0\)"),
        (np.empty((40, 8), np.float32), "expected dense float64"),
        (np.empty((8, 40)).T, "C-contiguous and writable"),
        ([[0.0] * 8] * 40, "expected a numpy array"),
        ((np.empty((40, 8)), np.empty((40, 8))), "takes an array"),
    ],
)
def test_bad_out_is_refused_before_the_call(spmm: Any, out: Any, message: str) -> None:
    a, b, c = _matrix(40, 30, 0.2, 6), np.ones((30, 8)), np.ones((40, 8))
    with pytest.raises(ArgumentError, match=message):
        spmm(a, b, c, out=out)


def test_read_only_out_is_refused(spmm: Any) -> None:
    out = np.empty((40, 8))
    out.flags.writeable = False
    with pytest.raises(ArgumentError, match="writable"):
        spmm(_matrix(40, 30, 0.2, 6), np.ones((30, 8)), np.ones((40, 8)), out=out)


def test_sparse_result_is_refused(private_cache: None) -> None:
    exe = sparsecomp.compile(SPGEMM)
    a = _matrix(5, 5, 0.5, 7)
    with pytest.raises(ArgumentError, match="dense results; this one is sparse"):
        exe(a, a, out=np.empty((5, 5)))


def test_overlap_is_copied(spmm: Any, caplog: pytest.LogCaptureFixture) -> None:
    """An out array that shares memory with an operand (but is not that operand)
    cannot be the kernel's destination: the result is computed, then copied."""
    rng = np.random.default_rng(8)
    a = _matrix(20, 20, 0.3, 8)
    both = rng.random((20, 40))
    b, c = both[:, :20].copy(), both[:, 20:].copy()
    expected = c + a @ b
    c_view = np.ascontiguousarray(c)
    out = c_view[:]  # a view of c: the same memory, another object
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        assert spmm(a, b, c_view, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert "shares memory with argument 2" in caplog.text


def test_loaded_executable_copies(spmv: Any, tmp_path: Any) -> None:
    loaded = sparsecomp.load(spmv.save(tmp_path / "k"))
    a, x = _matrix(30, 20, 0.2, 9), np.ones(20)
    y = np.empty(30)
    assert loaded(a, x, out=y) is y
    np.testing.assert_allclose(y, a @ x, rtol=1e-12)
    wrong = r"the array has shape \(31,\), the result has shape \(30,\)"
    with pytest.raises(ArgumentError, match=wrong):
        loaded(a, x, out=np.empty(31))


FILLED = """
func.func @f(%n: index, %v: f64) -> tensor<?xf64> {
  %e = tensor.empty(%n) : tensor<?xf64>
  %0 = linalg.fill ins(%v : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
"""


def test_size_from_a_scalar_is_checked(
    private_cache: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A result sized by an index argument: the runtime checks the out= array against the
    argument's value before the call, so the variant that writes into it is built."""
    exe = sparsecomp.compile(FILLED)
    out = np.zeros(5)
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        assert exe(5, 2.5, out=out) is out
    np.testing.assert_array_equal(out, np.full(5, 2.5))
    assert "compiled its variant for out=" in caplog.text
    wrong = r"size 5 in dimension 0 does not match size symbol 's0' = 6 \(from argument 0's value\)"
    with pytest.raises(ArgumentError, match=wrong):
        exe(6, 1.0, out=out)
    np.testing.assert_array_equal(out, np.full(5, 2.5))  # untouched


def test_repeated_calls_take_the_c_path(private_cache: None, monkeypatch: Any) -> None:
    """Once a kind of out= call has its variant, calls like it run in C: the Python
    checks are not reached, and the C path checks the same (writable, no shared
    memory, sizes), declining the rest to them."""
    from sparsecomp.runtime import destinations, fastcall

    assert fastcall.available()
    exe = sparsecomp.compile(SPMM_UPSTREAM)
    a, b = _matrix(40, 30, 0.2, 11), np.random.default_rng(11).random((30, 8))
    c, d = np.ones((40, 8)), np.empty((40, 8))
    for _ in range(2):  # the first call of each kind compiles its variant and routes it
        exe(a, b, c.copy(), out=d)
        exe(a, b, d, out=d)
    seen: list[int] = []
    careful = destinations._outs

    def counted(*args: Any) -> Any:
        seen.append(1)
        return careful(*args)

    monkeypatch.setattr(destinations, "_outs", counted)
    assert exe(a, b, c, out=d) is d  # a new destination
    np.testing.assert_allclose(d, c + a @ b, rtol=1e-12)
    np.testing.assert_array_equal(c, np.ones((40, 8)))
    d[:] = c
    assert exe(a, b, d, out=d) is d  # accumulated in place
    np.testing.assert_allclose(d, c + a @ b, rtol=1e-12)
    assert seen == []
    # what the C path declines reaches the Python checks, which say why
    frozen = np.empty((40, 8))
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="writable"):
        exe(a, b, c, out=frozen)
    with pytest.raises(ArgumentError, match=r"size 39 in dimension 0"):
        exe(a, b, c, out=np.empty((39, 8)))
    both = np.ones((40, 16))
    view, half = both[:, :8], np.ascontiguousarray(both[:, 8:])
    assert not view.flags.c_contiguous
    with pytest.raises(ArgumentError, match="C-contiguous"):
        exe(a, b, c, out=view)
    # an out array inside another operand's memory is copied in, never written early
    stacked = np.ones((60, 8))
    below, above = stacked[:40], stacked[20:]  # rows 20 to 39 are both
    assert exe(a, b, below, out=above) is above
    np.testing.assert_allclose(above, 1 + a @ b, rtol=1e-12)
    memory = np.zeros(a.nnz + 8 * 40)
    memory[: a.nnz] = a.data
    shared = a.copy()
    shared.data = memory[: a.nnz]  # assigned: scipy's constructor would copy it
    inside = memory[a.nnz - 8 :][: 8 * 40].reshape(40, 8)  # its first row: A's last values
    assert exe(shared, b, c, out=inside) is inside
    np.testing.assert_allclose(inside, c + a @ b, rtol=1e-12)
    assert len(seen) == 5
    # apart, two halves of one array take the C path
    apart = np.ones((80, 8))
    assert exe(a, b, apart[:40], out=apart[40:]) is not None
    np.testing.assert_allclose(apart[40:], 1 + a @ b, rtol=1e-12)
    assert len(seen) == 5
    del half


def test_one_array_for_two_results_is_refused(private_cache: None) -> None:
    """``out=(o, o)``: both results were written into ``o``, which held neither."""
    exe = sparsecomp.compile(TWO_RESULTS)
    a, x = _matrix(12, 9, 0.4, 5), np.random.default_rng(5).random(9)
    o = np.empty(12)
    with pytest.raises(ArgumentError, match="results 0 and 1 share memory"):
        exe(a, x, out=(o, o[:9]))


def test_prepared_operand_writes_into_out(spmm: Any, spmv: Any) -> None:
    """``exe(exe.prepare(A), ..., out=C)``: the prepared variant writes into C (it was
    never written when C was also the outs operand, and refused otherwise)."""
    a, x = _matrix(61, 47, 0.1, 11), np.random.default_rng(11).random(47)
    for layout in ("csr", "bsr:4x4"):
        y = np.full(61, np.nan)
        assert spmv(spmv.prepare(a, layout=layout), x, out=y) is y
        np.testing.assert_allclose(y, a @ x, rtol=1e-12)
        b, c = np.ones((47, 8)), np.ones((61, 8))
        assert spmm(spmm.prepare(a, layout=layout), b, c, out=c) is c
        np.testing.assert_allclose(c, 1 + a @ b, rtol=1e-12)


def test_prepared_operand_in_another_place_is_refused(spmv: Any) -> None:
    """It recursed until Python's limit (RecursionError)."""
    a = _matrix(6, 6, 0.5, 12)
    prepared = spmv.prepare(a, layout="csr")
    with pytest.raises(SparsecompError, match="prepared for its argument 0 as argument 1"):
        spmv(a, prepared)
