"""SpMV with its entries shared out evenly between GPU threads (``gpu_balance="nonzeros"``,
``sparse-iter-gpu-map-loops{balance=nonzeros}``): results equal scipy under the
emulator for any row lengths (empty rows, one huge row, rows split between threads),
for a fresh output and one the sum adds to; no thread's work depends on the longest row."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.compiler.cuda import ptxas
from sparsecomp.errors import SparsecompError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CSR = (
    "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)
#: ``y += A x``: the sum starts from the output's own value
ACCUMULATING = f"""
func.func @spmv_add(%A: tensor<?x?xf32, {CSR}>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {{
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, {CSR}>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""


@pytest.fixture(scope="module")
def split() -> sparsecomp.Executable:
    return sparsecomp.compile(
        EXAMPLES / "spmv.mlir", "cuda-emu:sm_90", gpu_balance="nonzeros", profile=True
    )


@pytest.fixture(scope="module")
def split_add() -> sparsecomp.Executable:
    return sparsecomp.compile(ACCUMULATING, "cuda-emu:sm_80", gpu_balance="nonzeros")


def _matrix(rows: int, cols: int, lengths: list[int], seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    counts = np.array([min(lengths[i % len(lengths)], cols) for i in range(rows)], np.int64)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = [np.sort(rng.choice(cols, int(c), replace=False)) for c in counts]
    flat = np.concatenate(indices) if rows else np.zeros(0)
    data = rng.standard_normal(int(indptr[-1])).astype(np.float32)
    return sp.csr_matrix((data, flat.astype(np.int32), indptr), shape=(rows, cols))


@settings(deadline=None, max_examples=40)
@given(
    rows=st.sampled_from([0, 1, 2, 127, 128, 129, 300]),
    cols=st.integers(1, 300),
    lengths=st.lists(st.sampled_from([0, 0, 1, 2, 3, 8, 40, 300]), min_size=1, max_size=9),
    seed=st.integers(0, 1000),
)
def test_equals_scipy(split, split_add, rows, cols, lengths, seed) -> None:
    a = _matrix(rows, cols, lengths, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(cols).astype(np.float32)
    y0 = rng.standard_normal(rows).astype(np.float32)
    np.testing.assert_allclose(split(a, x), a @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(split_add(a, x, y0.copy()), y0 + a @ x, rtol=1e-4, atol=1e-4)


def test_every_thread_takes_the_same_share(split) -> None:
    """One row of 3000 entries and 299 of 1: each of the 384 threads walks at most
    ceil(3299 / 384) = 9 entries, and a row split between threads is added atomically
    (the emulator's profile counts one atomic add per row part, and no races)."""
    lengths = [3000] + [1] * 299
    a = _matrix(300, 3000, lengths, 3)
    x = np.random.default_rng(3).standard_normal(3000).astype(np.float32)
    p = split.profile(a, x)
    np.testing.assert_allclose(p.result, a @ x, rtol=1e-4, atol=1e-3)
    share = -(-a.nnz // 384)
    # the long row's 3000 entries fall in ceil(3000 / 9) threads' shares; the rest are
    # a part each, with at most one more part per thread boundary inside a row
    assert 299 + 3000 // share <= p.atomics <= 299 + 384
    assert p.races == 0
    rows = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_90", profile=True)
    by_rows = rows.profile(a, x)
    assert by_rows.atomics == 0  # the row schedule's lanes store their rows
    # the long row keeps one warp busy for 3000 / 8 steps; split, no warp does much more
    # than the mean
    assert by_rows.longest_warp > 10 * by_rows.mean_warp
    assert p.longest_warp < 3 * p.mean_warp
    assert p.longest_warp * 5 < by_rows.longest_warp


#: ``C += A B``
SPMM_ADD = f"""
func.func @spmm_add(%A: tensor<?x?xf32, {CSR}>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, {CSR}>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


@pytest.fixture(scope="module")
def spmm_split() -> tuple[sparsecomp.Executable, sparsecomp.Executable]:
    plain = sparsecomp.compile(EXAMPLES / "spmm.mlir", "cuda-emu:sm_90", gpu_balance="nonzeros")
    adds = sparsecomp.compile(SPMM_ADD, "cuda-emu:sm_80", gpu_balance="nonzeros")
    return plain, adds


@settings(deadline=None, max_examples=25)
@given(
    rows=st.sampled_from([0, 1, 3, 4, 5, 130]),
    cols=st.integers(1, 200),
    k=st.sampled_from([1, 7, 32, 33, 70]),
    lengths=st.lists(st.sampled_from([0, 0, 1, 2, 9, 200]), min_size=1, max_size=7),
    seed=st.integers(0, 1000),
)
def test_spmm_warps_share_entries(spmm_split, rows, cols, k, lengths, seed) -> None:
    """SpMM: a warp per share of the entries, its lanes over 32 output columns."""
    plain, adds = spmm_split
    a = _matrix(rows, cols, lengths, seed)
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((cols, k)).astype(np.float32)
    c = rng.standard_normal((rows, k)).astype(np.float32)
    np.testing.assert_allclose(plain(a, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adds(a, b, c.copy()), c + a @ b, rtol=1e-4, atol=1e-4)


def test_spmm_split_schedule(spmm_split) -> None:
    """The SpMM split: 32 lanes x 4 warps a block, atomic adds of each row's part, the
    warp's walk over its entries staged in shared memory (uniform across its lanes)."""
    gpu = (spmm_split[0].directory / "gpu.mlir").read_text()
    assert "memref.atomic_rmw addf" in gpu
    assert "nvvm.bar.warp.sync" in gpu
    assert re.search(r"threads\(.*\) in \(%\w+ = %c32, %\w+ = %c4, %\w+ = %c1\)", gpu)
    sddmm = sparsecomp.compile(EXAMPLES / "sddmm.mlir", "cuda-emu:sm_80", gpu_balance="nonzeros")
    assert "atomic_rmw" not in (sddmm.directory / "gpu.mlir").read_text()  # not a row sum


def test_bad_balance_is_refused() -> None:
    with pytest.raises(SparsecompError, match="gpu_balance= must be 'rows' or 'nonzeros'"):
        sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_80", gpu_balance="entries")


@pytest.mark.skipif(ptxas() is None, reason="ptxas is not installed")
def test_ptx_adds_atomically() -> None:
    exe = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda:sm_90", gpu_balance="nonzeros")
    ptx = "".join(p.read_text() for p in exe.directory.glob("*.ptx"))
    assert "atom.global.add.f32" in ptx or "red.global.add.f32" in ptx
    assert exe.manifest["device"] == "cuda:sm_90"


@pytest.fixture(scope="module")
def sddmm_split() -> sparsecomp.Executable:
    return sparsecomp.compile(
        EXAMPLES / "sddmm.mlir", "cuda-emu:sm_90", gpu_balance="nonzeros", profile=True
    )


@settings(deadline=None, max_examples=25)
@given(
    st.integers(0, 70),
    st.integers(1, 50),
    st.integers(1, 40),
    st.lists(st.sampled_from([0, 0, 1, 2, 5, 9, 40, 200]), min_size=1, max_size=6),
    st.integers(0, 2**16),
)
def test_sddmm_warps_share_entries(sddmm_split, rows, cols, k, lengths, seed) -> None:
    """SDDMM split by entries equals scipy for any row lengths (empty rows, rows over
    many warps, K not a multiple of the group's 8 lanes), with no atomics and no
    address written by two blocks."""
    a = _matrix(rows, cols, lengths, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    y = rng.standard_normal((cols, k)).astype(np.float32)
    prof = sddmm_split.profile(a, x, y)
    got = prof.result.to_scipy().tocsr()
    want = a.multiply(x @ y.T).tocsr()
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-4, atol=1e-4)
    assert prof.atomics == 0
    assert prof.races == 0


def test_sddmm_split_evens_out_the_warps(sddmm_split) -> None:
    """One row of 600 entries among rows of 3: by rows one warp walks it all; split,
    the busiest warp does about what the others do."""
    a = _matrix(200, 700, [600] + [3] * 199, 7)
    rows = sparsecomp.compile(EXAMPLES / "sddmm.mlir", "cuda-emu:sm_90", profile=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 16)).astype(np.float32)
    y = rng.standard_normal((700, 16)).astype(np.float32)
    by_rows, split = rows.profile(a, x, y), sddmm_split.profile(a, x, y)
    assert by_rows.longest_warp > 20 * by_rows.mean_warp
    assert split.longest_warp < 3 * split.mean_warp
    assert split.longest_warp * 10 < by_rows.longest_warp


@pytest.mark.skipif(ptxas() is None, reason="ptxas is not installed")
def test_sddmm_split_ptx_has_no_atomics() -> None:
    """SDDMM's split writes each entry once: shuffles for the dot products, no atomics,
    and ptxas assembles it (a cubin beside the PTX)."""
    exe = sparsecomp.compile(EXAMPLES / "sddmm.mlir", "cuda:sm_90", gpu_balance="nonzeros")
    ptx = "".join(p.read_text() for p in exe.directory.glob("*.ptx"))
    assert "shfl.sync.bfly" in ptx
    assert "atom." not in ptx
    assert "red." not in ptx
    assert list(exe.directory.glob("*.cubin"))
