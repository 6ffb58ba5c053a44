"""The GPU schedule chosen per matrix: CSR SpMV, SpMM and SDDMM by rows, or entries split
evenly where the row lengths vary widely (formats/gpu_balance.py, exe.prepare on a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.formats import choose
from sparsecomp.formats.gpu_balance import SPLIT_FROM_CV, choose_balance, row_length_spread
from sparsecomp.formats.stats import matrix_stats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _power_law(n: int, seed: int) -> sp.csr_matrix:
    """Row lengths from a Pareto law (a few rows of hundreds of entries), random columns."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum((rng.pareto(1.1, n) * 2 + 1).astype(int), n)
    rows = np.repeat(np.arange(n), lengths)
    cols = rng.integers(0, n, lengths.sum())
    values = rng.standard_normal(len(rows)).astype(np.float32)
    return sp.csr_matrix((values, (rows, cols)), shape=(n, n))


def _even(n: int, seed: int) -> sp.csr_matrix:
    return sp.random(n, n, density=0.01, format="csr", dtype=np.float32, random_state=seed)


def _split(function) -> bool:
    """Whether a compiled function's GPU schedule is split by entries: SpMV and SpMM add
    rows' parts atomically, SDDMM's warps search for their entries' rows."""
    text = (function.directory / "gpu.mlir").read_text()
    return "memref.atomic_rmw" in text or "scf.while" in text


@pytest.fixture(scope="module")
def exes() -> dict[str, sparsecomp.Executable]:
    return {op: sparsecomp.compile(EXAMPLES / f"{op}.mlir", "cuda-emu:sm_90")
            for op in ("spmv", "spmm", "sddmm")}  # fmt: skip


def test_spread_by_hand() -> None:
    even = matrix_stats(sp.csr_matrix(np.ones((6, 4), np.float32)))
    assert row_length_spread(even) == 0.0
    # rows of 1, 1, 1 and 9 entries: mean 3, standard deviation sqrt(12)
    a = sp.lil_matrix((4, 10), dtype=np.float32)
    a[:3, 0] = 1
    a[3, :9] = 1
    assert row_length_spread(matrix_stats(a.tocsr())) == pytest.approx(12**0.5 / 3)
    assert row_length_spread(matrix_stats(sp.csr_matrix((5, 5), dtype=np.float32))) == 0.0


def test_rule_by_spread_and_op() -> None:
    uneven, even = matrix_stats(_power_law(2000, 1)), matrix_stats(_even(2000, 2))
    assert row_length_spread(uneven) >= SPLIT_FROM_CV > row_length_spread(even)
    for op in ("spmv", "spmm", "sddmm"):
        assert choose_balance(uneven, op)[0] == "nonzeros"
        assert choose_balance(even, op)[0] == "rows"
    balance, why = choose_balance(uneven, "spgemm")
    assert balance == "rows"
    assert "no schedule split" in why


def test_choose_says_the_schedule_on_a_gpu_only() -> None:
    a = _power_law(2000, 3)
    gpu = choose(a, op="spmv", target="cuda:sm_90")
    assert gpu.layout == "csr"
    assert gpu.balance == "nonzeros"
    assert "split evenly between threads" in gpu.why
    assert choose(a, op="spmv", target="host").balance is None
    assert choose(a, op="sddmm", k=8, target="cuda:sm_90").balance == "nonzeros"


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["spmv", "spmm", "sddmm"]), st.booleans(), st.integers(0, 2**16))
def test_prepare_takes_the_schedule_for_the_matrix(exes, op: str, uneven: bool, seed: int) -> None:
    """Power-law rows get the split variant, even rows the executable's own function;
    either way the product equals scipy's."""
    a = _power_law(1500, seed) if uneven else _even(1500, seed)
    exe = exes[op]
    prepared = exe.prepare(a, k=8)
    want = "nonzeros" if row_length_spread(matrix_stats(a)) >= SPLIT_FROM_CV else "rows"
    assert prepared.balance == want
    assert _split(prepared.variant) == (want == "nonzeros")
    assert (prepared.variant is exe.functions[op]) == (want == "rows")
    assert f"gpu_balance={want}" in repr(prepared)
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(1500 if op == "spmv" else (1500, 8)).astype(np.float32)
    if op == "sddmm":
        got = exe(prepared, b, b).to_scipy().toarray()
        np.testing.assert_allclose(got, a.multiply(b @ b.T).toarray(), rtol=1e-4, atol=1e-3)
    else:
        np.testing.assert_allclose(exe(prepared, b), a @ b, rtol=1e-4, atol=1e-3)


def test_forced_and_compiled_schedules_are_kept(exes) -> None:
    even = _even(800, 5)
    forced = exes["spmv"].prepare(even, balance="nonzeros")
    assert forced.balance == "nonzeros"
    assert _split(forced.variant)
    # compiled with gpu_balance: prepare keeps the user's schedule
    exe = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_90", gpu_balance="nonzeros")
    kept = exe.prepare(even)
    assert kept.balance == "nonzeros"
    assert kept.variant is exe.functions["spmv"]
    x = np.arange(800, dtype=np.float32)
    np.testing.assert_allclose(exe(kept, x), even @ x, rtol=1e-4, atol=1e-3)


def test_bad_balances_are_refused(exes) -> None:
    a = _even(300, 6)
    with pytest.raises(SparsecompError, match="balance is 'rows' or 'nonzeros'"):
        exes["spmv"].prepare(a, balance="columns")
    with pytest.raises(SparsecompError, match="not spmv over bsr:4x4"):
        exes["spmv"].prepare(a, layout="bsr:4x4", balance="nonzeros")
    host = sparsecomp.compile(EXAMPLES / "spmv.mlir")
    with pytest.raises(SparsecompError, match="chooses a GPU schedule"):
        host.prepare(a, balance="nonzeros")


def test_a_loaded_executable_reports_its_own_schedule(tmp_path) -> None:
    """A saved GPU executable keeps its schedule in the manifest; loaded (no variants to
    compile), prepare reports that one whatever the matrix."""
    uneven, even = _power_law(800, 8), _even(800, 9)
    for balance in ("rows", "nonzeros"):
        exe = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_90", gpu_balance=balance)
        exe.save(tmp_path / balance)
        loaded = sparsecomp.load(tmp_path / balance)
        assert loaded.manifest["gpu_balance"] == balance
        for a in (uneven, even):
            prepared = loaded.prepare(a)
            assert prepared.balance == balance
            assert prepared.variant is loaded.functions["spmv"]
            x = np.ones(800, np.float32)
            np.testing.assert_allclose(loaded(prepared, x), a @ x, rtol=1e-4, atol=1e-3)
    plain = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_90")
    assert "gpu_balance" not in plain.manifest


def test_a_block_choice_for_an_f32_kernel_says_it_runs_as_tf32() -> None:
    """On a blocky matrix prepare() moves an f32 SpMM from CSR (f32 FMAs) to bsr:16x16,
    whose products run on the tensor cores as tf32: about 1000x the error, unsaid."""
    rng = np.random.default_rng(0)
    mask = np.kron(rng.random((8, 8)) < 0.5, np.ones((16, 16)))
    a = sp.csr_matrix((mask * rng.standard_normal(mask.shape)).astype(np.float32))
    b = rng.standard_normal((128, 32)).astype(np.float32)
    exe = sparsecomp.compile(EXAMPLES / "spmm.mlir", target="cuda-emu:sm_80")
    prepared = exe.prepare(a, k=32)
    assert prepared.choice is not None
    said = "tensor cores as tf32" in prepared.choice.why
    assert said == prepared.layout.startswith("bsr")
    np.testing.assert_allclose(exe(prepared, b), a @ b, rtol=1e-2, atol=1e-2)
