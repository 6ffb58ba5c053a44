"""Layout conversions at calls: converted once per operand, values gathered after, warned once
(runtime/conversions.py). Every result is checked against scipy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparsecomp
from cpu_kernels import compiled, spmv
from sparsecomp.errors import ConversionWarning
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import conversions

HYB = "hyb:1:2"


def _spmv(layout: str) -> Any:
    """The SpMV kernel for ``layout`` (shared by the tests), with nothing converted yet."""
    exe = compiled(spmv(layout, "f64"))
    caller = exe.functions["spmv"]._caller
    if caller is not None:
        caller.conversions.entries.clear()
        caller.conversions.reported.clear()
    return exe


def _matrix(seed: int, shape: tuple[int, int] = (30, 24), density: float = 0.2) -> Any:
    return sp.random(*shape, density=density, format="csr", random_state=seed)


def _count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts full conversions (``_plain``), cached or not."""
    counter = [0]
    plain = conversions._plain

    def counting(value: Any, layout: Any) -> Any:
        counter[0] += 1
        return plain(value, layout)

    monkeypatch.setattr(conversions, "_plain", counting)
    return counter


def test_scipy_to_bsr_once_then_values(
    monkeypatch: pytest.MonkeyPatch, private_cache: None
) -> None:
    exe = _spmv("bsr:2x2")
    a, x, y = _matrix(1), np.random.default_rng(1).random(24), np.zeros(30)
    counter = _count(monkeypatch)
    with pytest.warns(ConversionWarning, match=r"argument 0: converting a scipy csr matrix"):
        np.testing.assert_allclose(exe(a, x, y), a @ x, rtol=1e-12)
    assert counter[0] == 1
    a.data *= -3.0  # values may change between calls
    np.testing.assert_allclose(exe(a, x, y), a @ x, rtol=1e-12)
    assert counter[0] == 1  # gathered into the cached structure
    a.indices = a.indices.copy()  # new structure arrays: converted again
    np.testing.assert_allclose(exe(a, x, y), a @ x, rtol=1e-12)
    assert counter[0] == 2


def test_warned_once_per_kind(private_cache: None) -> None:
    exe = _spmv("bsr:2x2")
    x, y = np.ones(24), np.zeros(30)

    def calls() -> None:
        for seed in range(3):
            exe(_matrix(seed + 10), x, y)
        exe(SparseTensor.from_scipy(_matrix(20), "csc"), x, y)

    with pytest.warns(ConversionWarning) as record:
        calls()
    messages = [str(w.message) for w in record]
    assert len(messages) == 2, messages
    assert "exe.prepare(A)" in messages[0]
    assert "SparseTensor in" in messages[1]
    assert record[0].filename == __file__  # points at the caller's line (in calls)


def test_tensor_in_another_layout(monkeypatch: pytest.MonkeyPatch, private_cache: None) -> None:
    exe = _spmv("csr")
    a = _matrix(2)
    t = SparseTensor.from_scipy(a, HYB)
    x, y = np.random.default_rng(2).random(24), np.random.default_rng(3).random(30)
    counter = _count(monkeypatch)
    for _ in range(3):
        np.testing.assert_allclose(exe(t, x, y), y + a @ x, rtol=1e-12)
    assert counter[0] == 1


def test_duplicates_are_summed_every_call(
    monkeypatch: pytest.MonkeyPatch, private_cache: None
) -> None:
    exe = _spmv("bsr:2x2")
    rows, cols = np.array([0, 0, 3, 5]), np.array([1, 1, 2, 7])
    a = sp.coo_matrix((np.array([1.0, 2.0, 3.0, 4.0]), (rows, cols)), shape=(6, 8))
    counter = _count(monkeypatch)
    for _ in range(2):
        np.testing.assert_allclose(exe(a, np.ones(8), np.zeros(6)), a @ np.ones(8), rtol=1e-12)
    assert counter[0] == 2  # not numbered: repeated coordinates


@pytest.mark.parametrize("target", ["bsr:2x2", "ell"])
def test_empty_operands_into_padded_layouts(private_cache: None, target: str) -> None:
    """Nothing stored, yet the target has slots (padding): all zeros (fuzz seed 11, case 71)."""
    exe = _spmv(target)
    for a in (sp.csr_matrix((4, 6)), SparseTensor.from_scipy(sp.csr_matrix((4, 6)), "coo")):
        for _ in range(2):
            np.testing.assert_array_equal(exe(a, np.ones(6), np.ones(4)), np.ones(4))


def test_cache_is_bounded(private_cache: None) -> None:
    exe = _spmv("bsr:2x2")
    x, y = np.ones(24), np.zeros(30)
    kept = [_matrix(seed) for seed in range(conversions.KEEP + 3)]
    for a in kept:
        np.testing.assert_allclose(exe(a, x, y), a @ x, rtol=1e-12)
    assert len(exe.functions["spmv"]._caller.conversions.entries) == conversions.KEEP
    del kept, a
    assert not exe.functions["spmv"]._caller.conversions.entries  # dropped with the operands


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.integers(0, 11),
    cols=st.integers(1, 9),
    density=st.floats(0.0, 1.0),
    source=st.sampled_from(["scipy-csr", "scipy-csc", "scipy-coo", "csc", "coo", HYB, "ell"]),
    target=st.sampled_from(["csr", "bsr:2x2", "ell"]),
    seed=st.integers(0, 2**16),
)
def test_converted_calls_match_scipy(
    private_cache: None,
    rows: int,
    cols: int,
    density: float,
    source: str,
    target: str,
    seed: int,
) -> None:
    exe = _spmv(target)
    a = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    if source.startswith("scipy-"):
        arg: Any = a.copy().asformat(source.removeprefix("scipy-"))
    else:
        arg = SparseTensor.from_scipy(a, source)
    rng = np.random.default_rng(seed)
    x, y = rng.random(cols), rng.random(rows)
    for scale in (1.0, 2.0):  # the second call gathers the new values
        if scale != 1.0:
            if isinstance(arg, SparseTensor):  # values change through the tensor's arrays
                for part in arg.parts or (arg,):
                    part.values[...] *= scale
            else:
                arg.data *= scale
        np.testing.assert_allclose(exe(arg, x, y), y + scale * (a @ x), rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sparsecomp.errors.ConversionWarning")
def test_new_index_arrays_are_seen_even_at_an_old_id(private_cache: None) -> None:
    """A CSC operand's ``indices`` replaced by new arrays twice: the second new array
    took the freed original's ``id``, and the structure cached for the original was
    used (wrong rows, silently). The cache now holds the arrays it was built from."""
    exe = _spmv("csr")
    b = sp.random(30, 45, density=0.1, format="csc", random_state=0)
    a = sp.csc_matrix((b.data, b.indices.copy(), b.indptr.copy()), shape=(60, 45))
    x, y = np.random.default_rng(0).random(45), np.zeros(60)
    np.testing.assert_allclose(exe.spmv(a, x, y), a @ x, rtol=1e-12)
    for _ in range(2):
        a.indices = a.indices + 10  # a new array (the old one freed); rows move down by 10
    np.testing.assert_allclose(exe.spmv(a, x, y), a @ x, rtol=1e-12)


def test_vector_conversion_warning_names_a_vector(private_cache: None) -> None:
    """A scipy 1-D array converted for a sparse-vector argument: the warning says "coo
    vector" (it said "coo matrix") and offers no exe.prepare, which takes matrices."""
    exe = sparsecomp.compile("""
#SV = #sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>
func.func @dot(%a: tensor<?xf64, #SV>, %b: tensor<?xf64>) -> tensor<f64> {
  %z = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<f64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<f64>) -> tensor<f64>
  %r = linalg.dot ins(%a, %b : tensor<?xf64, #SV>, tensor<?xf64>) outs(%f : tensor<f64>)
      -> tensor<f64>
  return %r : tensor<f64>
}
""")
    v = sp.coo_array(np.array([0.0, 1.0, 0.0, 2.0]))
    with pytest.warns(ConversionWarning) as record:
        assert float(exe(v, np.arange(4.0))) == 7.0
    message = str(record[0].message)
    assert "converting a scipy coo vector (int32 indices)" in message
    assert "exe.prepare" not in message
