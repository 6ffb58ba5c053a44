"""The C call path (runtime/fastcall.py, runtime/_fastcall.c) against the Python path.

The C path must give the Python path's results for every call it takes,
take the calls it should (else there is no point to it), and hand every
other call over: changed or malformed operands, other shapes, types it does
not know. Programs are compiled by the real back end, in both forms users
write: ours (32-bit CSR, the output filled inside) and upstream's
(``#sparse_tensor.encoding`` without widths, an ``outs`` operand).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpu_kernels as K
import sparsecomp
from sparsecomp.errors import ArgumentError, FormatError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import fastcall

UPSTREAM = K.spmm_upstream()

OURS = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                            posWidth = 32, crdWidth = 32}>
func.func @spmm(%a: tensor<?x?xf64, #csr>, %b: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %m = tensor.dim %a, %c0 : tensor<?x?xf64, #csr>
  %k = tensor.dim %b, %c1 : tensor<?x?xf64>
  %e = tensor.empty(%m, %k) : tensor<?x?xf64>
  %c = linalg.fill ins(%zero : f64) outs(%e : tensor<?x?xf64>) -> tensor<?x?xf64>
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf64, #csr>, tensor<?x?xf64>)
                     outs(%c : tensor<?x?xf64>) -> tensor<?x?xf64>
  return %0 : tensor<?x?xf64>
}
"""

PROGRAMS = {"upstream": UPSTREAM, "ours": OURS}


def test_the_extension_is_built() -> None:
    """pip builds it where Python's headers exist; without it every call is Python's."""
    assert fastcall.available(), "sparsecomp.runtime._fastcall is not built"


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def form(request: pytest.FixtureRequest, private_cache: None) -> str:
    return request.param


@pytest.fixture(scope="module")
def exes(form: str) -> tuple[Any, Any]:
    """The same program twice: one calls through C where it can, one never does."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARSECOMP_NATIVE_CALLS", "0")
        python = sparsecomp.compile(PROGRAMS[form])
    return sparsecomp.compile(PROGRAMS[form]), python


def call(exe: Any, form: str, a: Any, b: np.ndarray, native: bool = True) -> np.ndarray:
    args = (a, b, np.zeros((a.shape[0], b.shape[1]))) if form == "upstream" else (a, b)
    if native:
        return exe(*args)
    with pytest.MonkeyPatch.context() as patch:  # variants made now stay Python too
        patch.setenv("SPARSECOMP_NATIVE_CALLS", "0")
        return exe(*args)


KINDS: dict[str, Callable[[sp.csr_matrix], Any]] = {
    "csr int32": lambda a: a,
    "csr int64": lambda a: _widened(a),
    "csr_array": sp.csr_array,
    "SparseTensor": lambda a: SparseTensor.from_scipy(a, "csr"),
    "csc": lambda a: a.tocsc(),
    "coo": lambda a: a.tocoo(),
    "unsorted": lambda a: _unsorted(a),
}


def _widened(a: sp.csr_matrix) -> sp.csr_matrix:
    out = a.copy()
    out.indptr, out.indices = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    return out


def _unsorted(a: sp.csr_matrix) -> sp.csr_matrix:
    """``a`` with each row's entries in descending column order."""
    indices, data = a.indices.copy(), a.data.copy()
    for lo, hi in zip(a.indptr[:-1], a.indptr[1:], strict=True):
        indices[lo:hi], data[lo:hi] = indices[lo:hi][::-1], data[lo:hi][::-1]
    out = sp.csr_matrix((data, indices, a.indptr.copy()), a.shape)
    out.has_sorted_indices = False
    return out


def matrix(m: int, n: int, density: float, seed: int) -> sp.csr_matrix:
    return sp.csr_matrix(sp.random(m, n, density=density, random_state=seed, format="csr"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 40),
    n=st.integers(1, 40),
    k=st.integers(1, 9),
    density=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    kind=st.sampled_from(sorted(KINDS)),
    seed=st.integers(0, 2**16),
)
def test_both_paths_agree_with_scipy(
    exes: tuple[Any, Any], form: str, m: int, n: int, k: int, density: float, kind: str, seed: int
) -> None:
    native, python = exes
    a = matrix(m, n, density, seed)
    b = np.random.default_rng(seed).standard_normal((n, k))
    operand = KINDS[kind](a)
    want = a @ b
    for _ in range(3):  # the first calls resolve and route, the third runs in C
        got = call(native, form, operand, b)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(call(python, form, operand, b, False), got, rtol=1e-12, atol=1e-14)


def test_small_calls_run_in_c(form: str) -> None:
    """After the first calls, a call with a scipy matrix or a SparseTensor takes the
    C path all the way: the function's router holds a route to a kernel. (A fresh
    executable: a router's table is bounded, 64 keys of sizes and 8 kernels per key,
    and the module's executables have met every kind of operand at random sizes; with
    them this failed once in a full run.)"""
    native = sparsecomp.compile(PROGRAMS[form])
    a, b = matrix(10, 10, 0.3, 1), np.ones((10, 4))
    function = native.functions["spmm"]
    for operand in (a, SparseTensor.from_scipy(a, "csr")):
        for _ in range(3):
            call(native, form, operand, b)
        args = (operand, b, np.zeros((10, 4))) if form == "upstream" else (operand, b)
        assert function._router(args) is not fastcall.MISS


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ("index beyond the columns", FormatError),
        ("negative index", FormatError),
        ("decreasing indptr", FormatError),
        ("shapes that do not agree", ArgumentError),
    ],
)
def test_changed_operands_take_the_python_path(
    exes: tuple[Any, Any], form: str, change: str, error: type[Exception]
) -> None:
    """The C path checks a scipy matrix's arrays at every call, as the Python path
    does: what it declines reaches the Python path, which says what is wrong."""
    native, _ = exes
    a, b = matrix(8, 6, 0.5, 2), np.ones((6, 3))
    for _ in range(3):
        np.testing.assert_allclose(call(native, form, a, b), a @ b, rtol=1e-12)
    if change == "index beyond the columns":
        a.indices[0] = 6
    elif change == "negative index":
        a.indices[-1] = -1
    elif change == "decreasing indptr":
        a.indptr[3] = a.indptr[4] + 1
    else:
        b = np.ones((7, 3))
    with pytest.raises(error):
        call(native, form, a, b)


def test_declined_arguments_still_work(exes: tuple[Any, Any], form: str) -> None:
    """What the C path does not take (a strided or Fortran-ordered dense operand) is
    copied by the Python path, with the right result; a float32 one is refused there."""
    native, _ = exes
    a = matrix(9, 7, 0.4, 3)
    b = np.random.default_rng(3).standard_normal((7, 10))
    for _ in range(3):
        call(native, form, a, b[:, :5].copy())
    for given_b in (b[:, ::2], np.asfortranarray(b[:, :5])):
        np.testing.assert_allclose(call(native, form, a, given_b), a @ given_b, rtol=1e-12)
    with pytest.raises(ArgumentError, match="expected dtype float64, got float32"):
        call(native, form, a, b[:, :5].astype(np.float32))


def test_concurrent_calls(exes: tuple[Any, Any], form: str) -> None:
    """Kernels run without the GIL; calls from several threads do not mix."""
    native, _ = exes
    cases = [(matrix(12, 9, 0.3, s), np.full((9, 4), float(s))) for s in range(6)]
    for a, b in cases:
        call(native, form, a, b)
    errors: list[BaseException] = []

    def work(a: sp.csr_matrix, b: np.ndarray) -> None:
        try:
            for _ in range(200):
                np.testing.assert_allclose(call(native, form, a, b), a @ b, rtol=1e-12)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=case) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_routes_to_variants_follow_the_knob(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A route to a variant is not taken while SPARSECOMP_SPECIALIZE=0: the call
    goes the Python way, which then converts the operand or runs the dynamic kernel."""
    native = sparsecomp.compile(PROGRAMS[form])  # its own variants: none for K = 2 yet
    a, b = matrix(5, 5, 0.6, 4), np.ones((5, 2))
    for _ in range(3):
        call(native, form, a, b)
    function = native.functions["spmm"]
    args = (a, b, np.zeros((5, 2))) if form == "upstream" else (a, b)
    assert function._router(args) is not fastcall.MISS
    monkeypatch.setenv("SPARSECOMP_SPECIALIZE", "0")
    assert function._router(args) is fastcall.MISS  # every route here goes to a variant
    np.testing.assert_allclose(call(native, form, a, b), a @ b, rtol=1e-12)


def test_signatures_beyond_the_c_path_take_the_python_path(private_cache: None) -> None:
    """A function with more arguments than the extension's plans hold is still called,
    the Python way."""
    n = 40
    params = ", ".join(f"%x{i}: tensor<?xf64>" for i in range(n))
    text = f"""
    func.func @last({params}) -> tensor<?xf64> {{
      return %x{n - 1} : tensor<?xf64>
    }}
    """
    exe = sparsecomp.compile(text)
    args = [np.full(3, float(i)) for i in range(n)]
    np.testing.assert_array_equal(exe(*args), args[-1])
    assert exe.functions["last"]._caller.native is None
