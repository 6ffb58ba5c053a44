"""The profiler's C recorder (exact beside the Python one, sampling large calls) and the
GPU time model it feeds."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.runtime import gpu_model
from sparsecomp.runtime import profile as P

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FIELDS = ("total", "loads", "stores", "sites", "atomics", "shared_requests", "bank_conflicts",
          "races", "longest_warp", "mean_warp", "warps", "mma_instructions", "mma_flops",
          "sampled")  # fmt: skip


@pytest.fixture(scope="module")
def exes() -> dict[str, sparsecomp.Executable]:
    return {
        op: sparsecomp.compile(EXAMPLES / f"{op}.mlir", "cuda-emu:sm_80", profile=True)
        for op in ("spmv", "spmm", "sddmm")
    }


def _matrix(m: int, n: int, seed: int) -> sp.csr_matrix:
    """Rows of very different lengths: a dense first row, an empty one, the rest random."""
    rng = np.random.default_rng(seed)
    a = sp.random(m, n, density=0.05, format="lil", dtype=np.float32, random_state=rng)
    a[0, :] = rng.standard_normal(n).astype(np.float32)
    a[min(1, m - 1), :] = 0
    return a.tocsr()


def _args(op: str, a: sp.csr_matrix, k: int, seed: int) -> tuple:
    """The example's arguments: ``a`` and its dense operands, standard normal."""
    rng = np.random.default_rng(seed)
    m, n = a.shape
    shapes = {"spmv": [(n,)], "spmm": [(n, k)], "sddmm": [(m, k), (n, k)]}[op]
    return (a, *(rng.standard_normal(shape).astype(np.float32) for shape in shapes))


@pytest.mark.parametrize("op", ["spmv", "spmm", "sddmm"])
def test_c_recorder_counts_what_the_python_recorder_counts(exes, op: str) -> None:
    """Every figure of the C recorder's profile equals the one recorded through a Python
    callback and counted by sorting (the reference path, kept for older builds)."""
    function = exes[op].functions[op]
    args = _args(op, _matrix(70, 45, seed=1), 20, seed=2)
    fast = function.profile(*args, max_records=0)
    hook = ctypes.c_void_p.in_dll(function._library, P.HOOK)
    slow = P._profile_in_python(hook, lambda: function(*args))
    for name in FIELDS:
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.warps > 0
    assert fast.longest_warp > fast.mean_warp


def test_sampling_bounds_the_records_and_keeps_warps_exact(exes) -> None:
    """Past max_records the recorder keeps every 2nd, 4th, ... block: the warps' figures
    stay exact (counted for every block), the sectors are scaled from the sample."""
    function = exes["spmm"].functions["spmm"]
    a = sp.random(2000, 300, density=0.02, format="csr", dtype=np.float32, random_state=3)
    args = _args("spmm", a, 32, seed=4)
    full = function.profile(*args, max_records=0)
    sampled = function.profile(*args, max_records=20_000)
    assert full.sampled == 1.0
    assert 0 < sampled.sampled < 0.25
    for name in ("longest_warp", "mean_warp", "warps"):
        assert getattr(sampled, name) == getattr(full, name), name
    assert sampled.total.sectors == pytest.approx(full.total.sectors, rel=0.15)
    assert sampled.total.requests == pytest.approx(full.total.requests, rel=0.15)
    np.testing.assert_allclose(sampled.result, a @ args[1], rtol=1e-4, atol=1e-4)
    assert "sampled" in str(sampled)
    assert "sampled" not in str(full)
    for t in [sampled.total, *sampled.sites.values()]:  # each count scaled alone broke these
        assert t.lane_utilization <= 1.0
        assert t.sector_efficiency <= 1.0
        assert t.traffic_efficiency <= 1.0


def test_model_features_of_a_profile(exes) -> None:
    prof = exes["spmv"].profile(*_args("spmv", _matrix(50, 40, seed=5), 0, seed=6))
    features = prof.model_features()
    assert features == {
        "launches": 1,
        "bytes": prof.total.sectors * P.SECTOR,
        "requests": prof.total.requests + prof.shared_requests,
        "busiest": prof.longest_warp,
    }
    seconds = gpu_model.estimate_seconds(features)
    assert seconds > 0


def test_estimate_by_hand() -> None:
    model = {"host": 1.0, "launch": 2.0, "byte": 3.0, "busiest": 5.0, "request": 7.0}
    memory_bound = {"launches": 2, "bytes": 10, "requests": 1, "busiest": 1}
    assert gpu_model.estimate_seconds(memory_bound, model) == 1 + 4 + 30 + 7
    one_long_row = {"launches": 1, "bytes": 1, "requests": 0, "busiest": 100}
    assert gpu_model.estimate_seconds(one_long_row, model) == 1 + 2 + 500


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_fit_recovers_a_model_from_its_own_times(seed: int) -> None:
    """Times made by a known model are fitted back to the same estimates."""
    rng = np.random.default_rng(seed)
    truth = {"host": 6e-5, "launch": gpu_model.LAUNCH, "byte": 1 / 3e12, "busiest": 2e-7,
             "request": 2e-10}  # fmt: skip
    features = [
        {"launches": float(rng.integers(1, 3)), "bytes": float(10 ** rng.uniform(5, 10)),
         "requests": float(10 ** rng.uniform(3, 8)), "busiest": float(10 ** rng.uniform(0, 5))}
        for _ in range(40)
    ]  # fmt: skip
    times = [gpu_model.estimate_seconds(f, truth) for f in features]
    fitted = gpu_model.fit(features, times)
    again = [gpu_model.estimate_seconds(f, fitted) for f in features]
    np.testing.assert_allclose(again, times, rtol=0.005)
    for name, value in truth.items():
        assert fitted[name] == pytest.approx(value, rel=0.05), name


def test_a_heavily_sampled_profile_keeps_its_ratios_bounded(exes) -> None:
    """1000 records of a 2000 x 1500 SpMV (0.8% sampled): active lanes and requests,
    scaled up and rounded apart, gave 15557 lanes for 486 requests (utilization 1.0003)."""
    a = sp.random(2000, 1500, density=0.005, format="csr", dtype=np.float32, random_state=1)
    prof = exes["spmv"].functions["spmv"].profile(a, np.ones(1500, np.float32), max_records=1000)
    assert prof.sampled < 0.05
    assert all(t.lane_utilization <= 1.0 for t in [prof.total, *prof.sites.values()])


def test_a_prepared_operand_is_not_profiled_as_nothing(exes) -> None:
    """exe.profile(exe.prepare(A, "ell"), x) ran a variant the recorder does not count: a
    profile of 0 accesses, every efficiency 1.0 (session 44)."""
    a = sp.random(200, 150, density=0.02, format="csr", dtype=np.float32, random_state=2)
    exe = exes["spmv"]
    with pytest.raises(SparsecompError, match="a prepared operand runs a variant"):
        exe.functions["spmv"].profile(exe.prepare(a, "ell"), np.ones(150, np.float32))
