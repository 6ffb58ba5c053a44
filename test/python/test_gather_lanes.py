"""SpMV by lanes with gathered reads one by one (``sparse-iter-gather-lanes``, on
targets tuned for AMD): equal to scipy for every row length around the lane
count, both value types, both tunings."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as hs

import sparsecomp
from sparsecomp.targets.cpu import detect_host

SPMV = (Path(__file__).resolve().parents[2] / "benchmarks" / "kernels" / "spmv.mlir").read_text()


@functools.cache
def _spmv(dtype: str, tune: str) -> sparsecomp.Executable:
    host = detect_host()
    if host.arch != "x86_64":
        pytest.skip("tune = amd is an x86_64 tuning")
    source = SPMV if dtype == "float32" else SPMV.replace("f32", "f64")
    return sparsecomp.compile(source, target=dataclasses.replace(host, tune=tune))


def _matrix(lengths: list[int], cols: int, dtype: str, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    indices = [np.sort(rng.choice(cols, size=n, replace=False)) for n in lengths]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.concatenate(indices).astype(np.int32)
    values = rng.standard_normal(flat.shape[0]).astype(dtype)
    return sp.csr_matrix((values, flat, indptr), shape=(len(lengths), cols))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_around_the_lane_count(dtype: str) -> None:
    """Rows shorter than, equal to and longer than the lanes (8 f32 and 4 f64 with
    256-bit vectors), and empty ones."""
    lengths = [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 2, 0]
    a = _matrix(lengths, 80, dtype, 0)
    x = np.random.default_rng(1).standard_normal(80).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for tune in ("amd", "intel"):
        np.testing.assert_allclose(_spmv(dtype, tune)(a, x), a @ x, rtol=tol, atol=tol)


@settings(max_examples=30, deadline=None)
@given(
    lengths=hs.lists(hs.integers(0, 40), min_size=1, max_size=60),
    dtype=hs.sampled_from(["float32", "float64"]),
    tune=hs.sampled_from(["amd", ""]),
    seed=hs.integers(0, 2**16),
)
def test_spmv_by_lanes_equals_scipy(lengths: list[int], dtype: str, tune: str, seed: int) -> None:
    cols = 48
    a = _matrix(lengths, cols, dtype, seed)
    x = np.random.default_rng(seed + 1).standard_normal(cols).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(_spmv(dtype, tune)(a, x), a @ x, rtol=tol, atol=tol)


def test_scipy_operands_keep_their_guarded_variant() -> None:
    """Calls with a scipy operand compile a variant that checks its coordinates
    (sparse-iter-guard-coordinates); with the lanes after the guard it still
    does, and an out-of-range coordinate still raises."""
    from sparsecomp.errors import FormatError
    from sparsecomp.runtime import specialize

    host = detect_host()
    if host.arch != "x86_64":
        pytest.skip("tune = amd is an x86_64 tuning")
    exe = sparsecomp.compile(SPMV, target=dataclasses.replace(host, tune="amd"))  # its own
    a = _matrix([20, 9, 0, 33, 8], 50, "float32", 3)
    x = np.ones(50, np.float32)
    saved = specialize.GUARD_FROM
    specialize.GUARD_FROM = 1
    try:
        for _ in range(3):
            np.testing.assert_allclose(exe(a, x), a @ x, rtol=1e-5, atol=1e-5)
        spmv = exe.functions["spmv"]
        variants = [v for v in spmv.specializer.variants.values() if v is not None]
        assert any(v.signature.status for v in variants), "no guarded variant was compiled"
        bad = a.copy()
        bad.indices[30] = 50
        with pytest.raises(FormatError):
            exe(bad, x)
    finally:
        specialize.GUARD_FROM = saved
