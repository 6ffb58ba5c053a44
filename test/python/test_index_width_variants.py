"""Calls whose sparse operands have other index widths than the kernel's (runtime/specialize.py).

Programs are written the way upstream's sparse tests are: ``#sparse_tensor.encoding``
without widths (index-typed positions and coordinates), ``outs`` operands the
caller passes. Every result is checked against scipy.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.formats import SparseTensor, parse_layout
from sparsecomp.runtime.specialize import operand_layout

SPMM = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @spmm(%a: tensor<?x?xf64, #CSR>, %b: tensor<?x?xf64>,
                %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf64, #CSR>, tensor<?x?xf64>)
                     outs(%c : tensor<?x?xf64>) -> tensor<?x?xf64>
  return %0 : tensor<?x?xf64>
}
"""

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
    (key,) = add.functions["add"].specializer.variants
    assert [i for i, _ in key] == [0, 1]


def test_mixed_widths_of_one_type_convert(
    private_cache: None, caplog: pytest.LogCaptureFixture
) -> None:
    add = sparsecomp.compile(ADD)
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
