"""sparsecomp.dask: kernels over row partitions on a real Dask cluster, checked against scipy.

The partitioning and the putting together of results are checked without a
cluster (hypothesis); the rest runs on a ``distributed.LocalCluster`` of two
worker processes of one thread each, as a user would start one: SpMV, SpMM
and SDDMM on power-law matrices (rows split between partitions), the three
ways to make a distributed matrix, PageRank, a worker killed mid-run, a
partition the kernel cannot take, and workers that cannot import MLIR.
"""

from __future__ import annotations

import gc
import importlib
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("distributed")

import dask.array as da
import distributed

import sparsecomp
import sparsecomp.dask as sd
from sparsecomp.dask import worker
from sparsecomp.dask.partition import balanced, local_indptr, owners
from sparsecomp.errors import SparsecompError
from sparsecomp.script import Tensor, f64

# A killed worker leaves its sockets to the garbage collector, and distributed warns
# about ports; neither is about sparsecomp.
pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
REPO = Path(__file__).resolve().parents[2]
BLOCK_MLIR = REPO / "test" / "python" / "dask_no_mlir.py"


def power_law(m: int, n: int, seed: int, heavy: int = 3) -> sp.csr_matrix:
    """A random matrix with ``heavy`` rows far longer than the others (a graph's hubs)."""
    rng = np.random.default_rng(seed)
    A = sp.random(m, n, density=0.02, format="lil", random_state=seed, dtype=np.float64)
    for r in rng.choice(m, size=min(heavy, m), replace=False):
        cols = rng.choice(n, size=max(1, n * 3 // 4), replace=False)
        A[r, cols] = rng.standard_normal(cols.size)
    return A.tocsr()


# -- partitions, without a cluster ----------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 60),
    n=st.integers(1, 60),
    parts=st.integers(1, 9),
    heavy=st.integers(0, 3),
    seed=st.integers(0, 99),
)
def test_partitions_cover_everything_once_and_balance_entries(
    m: int, n: int, parts: int, heavy: int, seed: int
) -> None:
    A = power_law(m, n, seed, heavy)
    layout = balanced(A.indptr, parts)
    assert layout[0].row_start == 0
    assert layout[0].nz_start == 0
    assert layout[-1].row_stop == m
    assert layout[-1].nz_stop == A.nnz
    for a, b in itertools.pairwise(layout):
        assert a.nz_stop == b.nz_start  # entries: each once, in order
        assert b.row_start in (a.row_stop, a.row_stop - 1)  # rows: a split row is shared
    share = A.nnz / parts
    assert max(p.nnz for p in layout) <= share * 1.1 + 1  # even with hub rows
    x = np.random.default_rng(seed).standard_normal(n)
    blocks = []
    for p in layout:  # each partition's SpMV, then the chunks put together
        local = sp.csr_matrix(
            (A.data[p.nz_start : p.nz_stop], A.indices[p.nz_start : p.nz_stop],
             local_indptr(A.indptr, p)), shape=(p.rows, n),
        )  # fmt: skip
        blocks.append(local @ x)
    y = np.concatenate(
        [
            worker.assemble(lo, hi, [(layout[j].row_start, blocks[j]) for j in js])
            for lo, hi, js in owners(layout, m)
        ]
    )
    np.testing.assert_allclose(y, A @ x, rtol=1e-12, atol=1e-12)


def test_a_hub_row_is_split_and_max_combines_its_parts() -> None:
    A = sp.csr_matrix(np.vstack([np.ones((1, 100)), np.eye(4, 100)]))
    layout = balanced(A.indptr, 4)
    assert sum(p.row_start == 0 for p in layout) >= 3  # the hub spans partitions
    blocks = [(p.row_start, np.full(p.rows, float(k))) for k, p in enumerate(layout)]
    _, hi, js = owners(layout, A.shape[0])[-1]
    assert worker.assemble(0, 1, blocks[:3], "max").tolist() == [2.0]
    assert worker.assemble(0, 1, blocks[:3], "min").tolist() == [0.0]
    assert worker.assemble(0, 1, blocks[:3], "sum").tolist() == [3.0]
    assert hi == A.shape[0]
    assert js[-1] == len(layout) - 1


# -- on a cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> distributed.Client:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def exe() -> sparsecomp.runtime.Executable:
    return sparsecomp.compile(
        """
        #csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
        func.func @spmv(%A: tensor<?x?xf64, #csr>, %x: tensor<?xf64>) -> tensor<?xf64> {
          %c0 = arith.constant 0 : index
          %z = arith.constant 0.0 : f64
          %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
          %e = tensor.empty(%m) : tensor<?xf64>
          %y = linalg.fill ins(%z : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
          %r = linalg.matvec ins(%A, %x : tensor<?x?xf64, #csr>, tensor<?xf64>)
                             outs(%y : tensor<?xf64>) -> tensor<?xf64>
          return %r : tensor<?xf64>
        }
        func.func @spmm(%A: tensor<?x?xf64, #csr>, %B: tensor<?x?xf64>) -> tensor<?x?xf64> {
          %c0 = arith.constant 0 : index
          %c1 = arith.constant 1 : index
          %z = arith.constant 0.0 : f64
          %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
          %n = tensor.dim %B, %c1 : tensor<?x?xf64>
          %e = tensor.empty(%m, %n) : tensor<?x?xf64>
          %y = linalg.fill ins(%z : f64) outs(%e : tensor<?x?xf64>) -> tensor<?x?xf64>
          %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #csr>, tensor<?x?xf64>)
                             outs(%y : tensor<?x?xf64>) -> tensor<?x?xf64>
          return %r : tensor<?x?xf64>
        }
        """
    )


@pytest.fixture(scope="module")
def sddmm() -> sparsecomp.runtime.Executable:
    """examples/sddmm.mlir in f64."""
    return sparsecomp.compile((REPO / "examples" / "sddmm.mlir").read_text().replace("f32", "f64"))


def test_spmv_and_spmm_over_split_hub_rows_match_scipy(client, exe) -> None:
    A = power_law(300, 200, seed=1)
    D = sd.from_scipy(A, parts=5, client=client)
    assert D.npartitions == 5
    assert any(b.row_start < a.row_stop for a, b in zip(D.parts, D.parts[1:], strict=False))
    x = np.random.default_rng(1).standard_normal(200)
    y = sd.map(exe, "spmv", D, x)
    assert isinstance(y, da.Array)
    assert y.shape == (300,)
    np.testing.assert_allclose(y.compute(), A @ x, rtol=1e-10, atol=1e-10)
    B = np.random.default_rng(2).standard_normal((200, 7))
    np.testing.assert_allclose(sd.map(exe, "spmm", D, B).compute(), A @ B, rtol=1e-10, atol=1e-10)
    Bd = da.from_array(B, chunks=(50, 7))  # a dask.array operand
    np.testing.assert_allclose(sd.map(exe, "spmm", D, Bd).compute(), A @ B, rtol=1e-10, atol=1e-10)
    assert abs(D.to_scipy() - A).max() == 0


def test_sddmm_splits_x_by_rows_and_gives_a_distributed_result(client, sddmm) -> None:
    S = power_law(120, 120, seed=3)  # square: the op says which operand is split
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((120, 5)), rng.standard_normal((120, 5))
    D = sd.from_scipy(S, parts=4, client=client)
    R = sd.map(sddmm, "sddmm", D, X, Y)
    assert isinstance(R, sd.DistributedMatrix)
    want = S.multiply(X @ Y.T).tocsr()
    got = R.to_scipy(client)
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-10, atol=1e-10)


def test_from_files_and_from_dask_array(client, exe, tmp_path: Path) -> None:
    A = power_law(90, 60, seed=4)
    paths = []
    for k, (lo, hi) in enumerate([(0, 30), (30, 55), (55, 90)]):
        path = tmp_path / (f"part{k}.npz" if k != 1 else f"part{k}.mtx")
        if k == 1:
            scipy.io.mmwrite(str(path), A[lo:hi])
        else:
            sp.save_npz(path, A[lo:hi])
        paths.append(str(path))
    x = np.arange(60, dtype=np.float64)
    D = sd.from_files(paths, client=client)
    assert D.shape == (90, 60)
    assert D.nnz == A.nnz
    np.testing.assert_allclose(sd.map(exe, "spmv", D, x).compute(), A @ x, rtol=1e-10)
    chunks = [
        da.from_delayed(_delayed(A[lo:hi]), (hi - lo, 60), A.dtype)
        for lo, hi in [(0, 45), (45, 90)]
    ]
    E = sd.from_dask_array(da.concatenate(chunks, axis=0), client=client)
    np.testing.assert_allclose(sd.map(exe, "spmv", E, x).compute(), A @ x, rtol=1e-10)


def _delayed(value):
    import dask

    return dask.delayed(value)


def pagerank(
    client, exe, A: sp.csr_matrix, iterations: int, damping: float = 0.85, each=None
) -> np.ndarray:
    """PageRank by power iteration: the matrix persisted once, the vector shipped each time."""
    n = A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    P = sp.diags(np.where(out > 0, 1 / np.maximum(out, 1e-300), 0)) @ A  # row-stochastic
    D = sd.from_scipy(P.T.tocsr(), client=client)
    r = np.full(n, 1 / n)
    for k in range(iterations):
        if each is not None:
            each(k)
        dangling = r[out == 0].sum()
        r = damping * (sd.map(exe, "spmv", D, r).compute() + dangling / n) + (1 - damping) / n
    return r


def reference_pagerank(A: sp.csr_matrix, iterations: int, damping: float = 0.85) -> np.ndarray:
    n = A.shape[0]
    out = np.asarray(A.sum(axis=1)).ravel()
    P = sp.diags(np.where(out > 0, 1 / np.maximum(out, 1e-300), 0)) @ A
    r = np.full(n, 1 / n)
    for _ in range(iterations):
        r = damping * (P.T @ r + r[out == 0].sum() / n) + (1 - damping) / n
    return r


def test_pagerank_equals_scipy(client, exe) -> None:
    A = power_law(200, 200, seed=5)
    A.data[:] = 1.0
    got = pagerank(client, exe, A, 30)
    np.testing.assert_allclose(got, reference_pagerank(A, 30), rtol=1e-10)
    assert abs(got.sum() - 1) < 1e-9


def _kill_one(client) -> None:
    """SIGKILL one worker process (the cluster's are on this machine), and check that it
    died: ``client.run(os._exit, wait=False)`` raised "Combination not supported" on
    the worker with distributed 2026.8 and killed nothing, which let this test pass."""
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"worker {victim} (pid {pid}) is still alive")


def test_a_worker_killed_mid_run_and_the_result_is_still_right(client, exe) -> None:
    """Killed while a job is in flight, and between two PageRank iterations: the
    partitions, packed copies and the executable it held are made again elsewhere."""
    A = power_law(2000, 1500, seed=6)
    D = sd.from_scipy(A, parts=40, client=client)
    x = np.random.default_rng(6).standard_normal(1500)
    pending = client.compute(sd.map(exe, "spmm", D, np.tile(x[:, None], (1, 64))))
    _kill_one(client)
    np.testing.assert_allclose(pending.result()[:, 3], A @ x, rtol=1e-10)
    client.wait_for_workers(2, timeout=60)
    G = power_law(300, 300, seed=9)
    G.data[:] = 1.0
    got = pagerank(client, exe, G, 12, each=lambda k: _kill_one(client) if k == 5 else None)
    np.testing.assert_allclose(got, reference_pagerank(G, 12), rtol=1e-10)
    client.wait_for_workers(2, timeout=60)


def test_a_partition_the_kernel_cannot_take_is_named(client, exe) -> None:
    A = power_law(50, 40, seed=7)
    D = sd.from_scipy(A, parts=2, client=client)
    with pytest.raises(
        SparsecompError, match=r"partition \d \(rows \d+:\d+\): spmv: argument 1 .*complex128"
    ):
        sd.map(exe, "spmv", D, np.ones(40, np.complex128)).compute()
    with pytest.raises(SparsecompError, match=r"operand 1 has 41 rows; .*the matrix is 50x40"):
        sd.map(exe, "spmv", D, np.ones(41))
    with pytest.raises(SparsecompError, match=r"operand 1 is a list; .* rank-1 array"):
        sd.map(exe, "spmv", D, [1.0] * 40)  # it was an AttributeError
    with pytest.raises(SparsecompError, match=r"operand 1 is of rank 1; .* rank-2 array"):
        sd.map(exe, "spmm", D, np.ones(40))
    with pytest.raises(SparsecompError, match=r"split names position\(s\) \[5\]"):
        sd.map(exe, "spmv", D, np.ones(40), split=[5])  # it was accepted


def test_a_reduction_over_all_rows_is_refused_as_not_row_wise(client) -> None:
    """A function of a 0-d result is no row-wise function: map says so (it said it
    could not tell the columns of a rank-0 result)."""
    total = sparsecomp.compile(
        """
        #csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
        func.func @total(%A: tensor<?x?xf64, #csr>, %s: tensor<f64>) -> tensor<f64> {
          %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                                affine_map<(i, j) -> ()>],
                               iterator_types = ["reduction", "reduction"]}
              ins(%A : tensor<?x?xf64, #csr>) outs(%s : tensor<f64>) {
          ^bb0(%a: f64, %o: f64):
            %t = arith.addf %a, %o : f64
            linalg.yield %t : f64
          } -> tensor<f64>
          return %r : tensor<f64>
        }
        """
    )
    D = sd.from_scipy(power_law(20, 20, seed=3), parts=2, client=client)
    with pytest.raises(SparsecompError, match=r"row-wise functions.*'total' returns a scalar"):
        sd.map(total, "total", D, np.zeros((), np.float64))


def test_a_transposed_product_is_refused_where_part_rows_equal_columns(client) -> None:
    """``A^T x`` on a 2000x1000 matrix split in two parts of 1000 rows: each part's
    result had the expected length, and map stacked them (a wrong (2000,) result).
    Its result's size is now the matrix's column symbol in the signature."""

    @sparsecomp.kernel
    def spmvt(A: Tensor[f64, ("M", "N"), "csr"], x: Tensor[f64, "M"]) -> Tensor[f64, "N"]:
        y[j] += A[i, j] * x[i]
        return y

    exe = spmvt.compile("host")
    assert exe.functions["spmvt"].signature.results[0].shape == ("N",)
    rng = np.random.default_rng(4)  # five entries a row: two balanced parts of 100 rows
    cols = np.concatenate([rng.choice(100, 5, replace=False) for _ in range(200)])
    A = sp.csr_matrix((rng.standard_normal(1000), cols, np.arange(0, 1001, 5)), (200, 100))
    D = sd.from_scipy(A, parts=2, client=client)
    assert [p.row_stop - p.row_start for p in D.parts] == [100, 100]
    with pytest.raises(SparsecompError, match=r"'spmvt' returns as many rows as the matrix's"):
        sd.map(exe, "spmvt", D, np.ones(200)).compute()


def test_map_takes_an_executable_and_says_what_else_it_got(client, exe) -> None:
    @sparsecomp.kernel
    def scale(A: Tensor[f64, ("M", "N"), "csr"], x: Tensor[f64, "N"]) -> Tensor[f64, "M"]:
        y[i] += A[i, j] * x[j]
        return y

    D = sd.from_scipy(power_law(20, 20, seed=5), parts=2, client=client)
    with pytest.raises(SparsecompError, match="not a @kernel") as info:
        sd.map(scale, "scale", D, np.ones(20))
    assert "scale.compile('host')" in str(info.value)
    with pytest.raises(SparsecompError, match="not Function") as info:
        sd.map(exe.functions["spmv"], "spmv", D, np.ones(20))
    assert "sd.map(exe, 'spmv', ...)" in str(info.value)


def test_a_closed_client_is_named(exe) -> None:
    """A matrix whose client was closed, or a closed client given: a clear error (a map
    failed at compute with "Missing dependency", from_scipy with an AttributeError)."""
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    c = distributed.Client(cluster)
    A = power_law(20, 20, seed=4)
    D = sd.from_scipy(A, parts=2, client=c)
    y = c.compute(sd.map(exe, "spmv", D, np.ones(20)), sync=True)  # this client's cluster
    np.testing.assert_allclose(y, A @ np.ones(20))
    c.close()
    cluster.close()
    with pytest.raises(SparsecompError, match="the Dask client is closed"):
        sd.map(exe, "spmv", D, np.ones(20))
    with pytest.raises(SparsecompError, match="the Dask client is closed"):
        sd.from_scipy(A, parts=2, client=c)


def test_workers_without_mlir_or_a_compiler_run_the_shipped_executable(exe) -> None:
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
        preload=[str(BLOCK_MLIR)],
    )  # fmt: skip
    with distributed.Client(cluster) as c:
        blocked = c.run(lambda: (sys.modules.get("mlir", "absent"), os.environ.get("PATH")))
        assert list(blocked.values()) == [(None, "")]
        A = power_law(80, 50, seed=8)
        x = np.random.default_rng(8).standard_normal(50)
        D = sd.from_scipy(A, parts=3, client=c)
        np.testing.assert_allclose(sd.map(exe, "spmv", D, x, client=c).compute(), A @ x, rtol=1e-10)
    cluster.close()


def test_power_iteration_finds_the_largest_eigenvalue(client, exe) -> None:
    """The matrix persisted once; each step ships the vector out and back."""
    from scipy.sparse.linalg import eigsh

    B = power_law(250, 250, seed=10)
    B.data = np.abs(B.data)
    S = (B + B.T).tocsr()  # symmetric, nonnegative: one dominant eigenvalue
    D = sd.from_scipy(S, client=client)
    v = np.ones(250) / np.sqrt(250)
    for _ in range(40):  # the hubs leave a wide gap to the second eigenvalue
        w = sd.map(exe, "spmv", D, v).compute()
        v = w / np.linalg.norm(w)
    rayleigh = v @ (S @ v)
    want = eigsh(S, k=1, which="LA", return_eigenvectors=False)[0]
    assert abs(rayleigh - want) < 1e-9 * abs(want)


def test_two_layer_gcn_forward_on_a_partitioned_graph(client, exe) -> None:
    """H2 = Â relu(Â X W1) W2 with Â = D^-1/2 (A + I) D^-1/2 in partitions: the
    hidden features stay on the cluster (a dask.array) between the layers."""
    import networkx as nx

    graph = nx.barabasi_albert_graph(300, 3, seed=11)  # hubs: power-law degrees
    A = nx.to_scipy_sparse_array(graph, format="csr", dtype=np.float64) + sp.eye(300)
    d = np.asarray(A.sum(axis=1)).ravel() ** -0.5
    norm = sp.csr_matrix(sp.diags(d) @ A @ sp.diags(d))
    rng = np.random.default_rng(11)
    X, W1, W2 = (
        rng.standard_normal((300, 16)),
        rng.standard_normal((16, 8)),
        rng.standard_normal((8, 4)),
    )
    D = sd.from_scipy(norm, client=client)
    hidden = sd.map(exe, "spmm", D, X @ W1)  # a dask.array, on the workers
    H1 = da.maximum(hidden, 0)
    out = sd.map(exe, "spmm", D, H1 @ W2).compute()
    want = norm @ np.maximum(norm @ (X @ W1), 0) @ W2
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)


def test_each_partition_in_the_layout_chosen_for_it_on_its_worker(client) -> None:
    """layout="auto": the workers choose per partition (as formats.choose does
    here), the function is compiled for each layout chosen, and the result is right."""
    from sparsecomp.formats import choose

    spmm = sparsecomp.compile(REPO / "examples" / "spmm.mlir")
    n = 8000
    # dense 8x8 blocks (a block layout) over scattered entries (rows: CSR)
    blocks = sp.kron(sp.random(n // 8, n // 8, density=0.002, random_state=3), np.ones((8, 8)))
    noise = sp.random(n, n, density=0.0003, random_state=12)
    A = sp.vstack([blocks, noise], format="csr", dtype=np.float32)
    D = sd.from_scipy(A, parts=2, client=client)
    B = np.random.default_rng(12).standard_normal((n, 32)).astype(np.float32)
    got = sd.map(spmm, "spmm", D, B, layout="auto").compute()
    np.testing.assert_allclose(got, A @ B, rtol=1e-4, atol=1e-4)
    pieces = client.compute(D.pieces, sync=True)
    assert D.layouts["spmm"] == [choose(p, op="spmm", k=32).layout for p in pieces]
    assert len(set(D.layouts["spmm"])) == 2, D.layouts  # two layouts, two variants


def test_packed_partitions_survive_serialization(client, exe) -> None:
    """What Dask does to a partition it spills to disk or moves: pickle it."""
    A = power_law(120, 90, seed=13)
    D = sd.from_scipy(A, parts=3, client=client)
    sd.map(exe, "spmv", D, np.ones(90)).compute()
    ((tasks, _),) = D.packed.values()
    packed = client.compute(tasks, sync=True)  # serialized by the workers, read here
    pieces = client.compute(D.pieces, sync=True)
    for tensor, piece in zip(packed, pieces, strict=True):
        assert abs(tensor.to_scipy() - piece).max() == 0


def test_pagerank_with_the_vector_kept_on_the_cluster(client, exe) -> None:
    """Each iteration's result, a persisted dask.array, is the next one's operand."""
    G = power_law(300, 300, seed=14)
    G.data[:] = 1.0
    n = G.shape[0]
    out = np.asarray(G.sum(axis=1)).ravel()
    P = sp.diags(np.where(out > 0, 1 / np.maximum(out, 1e-300), 0)) @ G
    D = sd.from_scipy(P.T.tocsr(), client=client)
    dangling = da.from_array((out == 0).astype(np.float64), chunks=n)
    r = da.full(n, 1 / n, chunks=n)
    for _ in range(12):
        r = (0.85 * (sd.map(exe, "spmv", D, r) + (r * dangling).sum() / n) + 0.15 / n).persist()
    np.testing.assert_allclose(r.compute(), reference_pagerank(G, 12), rtol=1e-10)


def test_a_matrix_runs_on_its_own_cluster_where_a_program_holds_two(client) -> None:
    """Dask's current client is the last one made; a matrix and its map default to the
    client that holds its partitions (the executable shipped there, not elsewhere)."""
    doubled = sparsecomp.compile(
        (REPO / "examples" / "spmv.mlir").read_text().replace("f32", "f64")
        + "\n// a program no other test ships\n"
    )
    other = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    with distributed.Client(other) as newer:
        assert distributed.get_client() is newer
        A = power_law(90, 60, seed=11)
        x = np.random.default_rng(11).standard_normal(60)
        D = sd.from_scipy(A, parts=3, client=client)  # the older client's cluster
        y = sd.map(doubled, "spmv", D, x)
        np.testing.assert_allclose(client.compute(y).result(), A @ x, rtol=1e-10)
        np.testing.assert_allclose(D.to_scipy().toarray(), A.toarray())
    other.close()


# -- a battery of user-style programs (session 44) ---------------------------------

ACCUMULATE = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @spmv_acc(%A: tensor<?x?xf64, #csr>, %x: tensor<?xf64>, %y: tensor<?xf64>)
    -> tensor<?xf64> {
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf64, #csr>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %r : tensor<?xf64>
}
func.func @spmm_bias(%A: tensor<?x?xf64, #csr>, %B: tensor<?x?xf64>, %b: tensor<?xf64>)
    -> tensor<?x?xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf64>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64>
  %c = linalg.broadcast ins(%b : tensor<?xf64>) outs(%e : tensor<?x?xf64>) dimensions = [0]
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #csr>, tensor<?x?xf64>)
                     outs(%c : tensor<?x?xf64>) -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}
func.func @colsum(%A: tensor<?x?xf64, #csr>) -> tensor<?xf64> {
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %n = tensor.dim %A, %c1 : tensor<?x?xf64, #csr>
  %e = tensor.empty(%n) : tensor<?xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (j)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%A : tensor<?x?xf64, #csr>) outs(%f : tensor<?xf64>) {
    ^bb0(%a: f64, %o: f64):
      %s = arith.addf %a, %o : f64
      linalg.yield %s : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}
"""


def _hub() -> sp.csr_matrix:
    hub = sp.random(300, 300, density=0.01, format="lil", dtype=np.float64, random_state=1)
    hub[7, :] = 1.0
    return hub.tocsr()


def test_terms_added_per_row_count_once_on_a_split_row(client) -> None:
    """y + A x and A B + bias on a matrix whose hub row is split between partitions:
    each part added y[7] (and the bias) to its share of the row, and the sum counted it
    twice. y is split by rows without split= (its size is the matrix's row size)."""
    exe = sparsecomp.compile(ACCUMULATE)
    A = _hub()
    D = sd.from_scipy(A, parts=4, client=client)
    assert any(b.row_start < a.row_stop for a, b in itertools.pairwise(D.parts))
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(300), rng.standard_normal(300)
    np.testing.assert_allclose(sd.map(exe, "spmv_acc", D, x, y).compute(), y + A @ x, rtol=1e-10)
    B, b = rng.standard_normal((300, 3)), rng.standard_normal(3)
    got = sd.map(exe, "spmm_bias", D, B, b, split=[]).compute()
    np.testing.assert_allclose(got, A @ B + b, rtol=1e-10)
    with pytest.raises(SparsecompError, match=r"'colsum' returns as many rows as the matrix's"):
        sd.map(exe, "colsum", D).compute()  # its signature says so (it was the returned shape)
    with pytest.raises(SparsecompError, match="operand 1 has 299 rows; the function takes"):
        sd.map(exe, "spmv_acc", D, np.ones(299), y)


def _spmv_of_a_local_matrix(exe, A, x, client):  # type: ignore[no-untyped-def]
    return sd.map(exe, "spmv", sd.from_scipy(A, parts=3, client=client), x)


def test_a_result_keeps_its_matrix_alive(client, exe) -> None:
    """A matrix built in a helper (or inline in the call) and dropped: its persisted
    partitions were released and compute failed with "lost dependencies"."""
    A = power_law(200, 150, seed=11)
    x = np.random.default_rng(11).standard_normal(150)
    y = _spmv_of_a_local_matrix(exe, A, x, client) * 2.0
    gc.collect()
    time.sleep(0.3)  # the releases reach the scheduler
    np.testing.assert_allclose(y.compute(), 2.0 * (A @ x), rtol=1e-10)


def test_another_kernel_saved_to_the_same_directory_is_shipped(client, tmp_path: Path) -> None:
    """The shipped-executable cache was keyed by directory: a second kernel saved where
    the first was, then loaded, ran the first one on the workers."""
    A = power_law(120, 100, seed=12)
    x = np.random.default_rng(12).standard_normal(100)
    D = sd.from_scipy(A, parts=2, client=client)
    text = (REPO / "examples" / "spmv.mlir").read_text().replace("f32", "f64")
    sparsecomp.compile(text).save(tmp_path / "k")
    first = sparsecomp.load(tmp_path / "k")
    np.testing.assert_allclose(sd.map(first, "spmv", D, x).compute(), A @ x, rtol=1e-10)
    scaled = text.replace("%zero = arith.constant 0.0", "%zero = arith.constant 1.0")
    assert scaled != text
    time.sleep(0.01)  # a new modification time
    sparsecomp.compile(scaled).save(tmp_path / "k")
    second = sparsecomp.load(tmp_path / "k")
    np.testing.assert_allclose(sd.map(second, "spmv", D, x).compute(), 1 + A @ x, rtol=1e-10)


def test_persist_makes_the_partitions_again_after_a_restart(exe) -> None:
    """client.restart() drops every result; D.persist() makes the partitions from
    their tasks (it resubmitted the dropped futures, which failed)."""
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        A = power_law(150, 120, seed=13)
        x = np.random.default_rng(13).standard_normal(120)
        D = sd.from_scipy(A, parts=3, client=c)
        np.testing.assert_allclose(sd.map(exe, "spmv", D, x).compute(), A @ x, rtol=1e-10)
        c.restart()
        D.persist()
        np.testing.assert_allclose(sd.map(exe, "spmv", D, x).compute(), A @ x, rtol=1e-10)
    cluster.close()


def test_a_maps_result_says_it_cannot_be_made_again_after_a_restart(exe) -> None:
    """Its persist() resubmitted the futures the restart dropped, silently; the next
    map failed with "lost dependencies"."""
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    sddmm = sparsecomp.compile(REPO / "examples" / "sddmm.mlir")
    with distributed.Client(cluster) as c:
        S = sp.random(60, 50, density=0.1, format="csr", dtype=np.float32, random_state=3)
        X, Y = np.ones((60, 4), np.float32), np.ones((50, 4), np.float32)
        R = sd.map(sddmm, "sddmm", sd.from_scipy(S, parts=2, client=c), X, Y).persist()
        c.restart()
        with pytest.raises(SparsecompError, match="it is a map's result"):
            R.persist()
    cluster.close()


def test_from_files_reads_a_file_written_again(client, tmp_path: Path) -> None:
    """A read task was keyed by the path alone: a file rewritten (a time step's matrix)
    came back as the partition read before while the old matrix was alive."""
    path = tmp_path / "step.npz"
    seen = []
    for step in range(2):
        A = sp.random(40, 30, density=0.2, format="csr", random_state=step)
        sp.save_npz(path, A)
        D = sd.from_files([str(path)], client=client)
        seen.append(D)  # the previous matrix stays alive, as in a loop
        np.testing.assert_allclose(D.to_scipy().toarray(), A.toarray())


def test_from_files_reads_matrix_market_as_the_kernels_dtype(client, tmp_path: Path) -> None:
    """scipy reads a real .mtx as float64: an f32 kernel could not take the matrix, and
    a mix of .npz (f32) and .mtx was refused, with no way to say the dtype."""
    A = sp.random(80, 60, density=0.1, format="csr", dtype=np.float32, random_state=14)
    scipy.io.mmwrite(tmp_path / "a.mtx", A[:40])
    sp.save_npz(tmp_path / "b.npz", A[40:])
    paths = [str(tmp_path / "a.mtx"), str(tmp_path / "b.npz")]
    with pytest.raises(SparsecompError, match="differ in columns or dtype"):
        sd.from_files(paths, client=client)
    D = sd.from_files(paths, client=client, dtype=np.float32)
    spmv32 = sparsecomp.compile(REPO / "examples" / "spmv.mlir")
    x = np.random.default_rng(14).standard_normal(60).astype(np.float32)
    np.testing.assert_allclose(sd.map(spmv32, "spmv", D, x).compute(), A @ x, rtol=1e-5)


def test_an_explicit_layout_is_compiled_here_for_the_workers(client, exe) -> None:
    """layout="bsr:2x2" asked the workers' loaded executable to recompile (it cannot)."""
    A = sp.kron(sp.random(40, 30, density=0.1, random_state=15), np.ones((2, 2))).tocsr()
    D = sd.from_scipy(A, parts=2, client=client)
    x = np.random.default_rng(15).standard_normal(60)
    got = sd.map(exe, "spmv", D, x, layout="bsr:2x2").compute()
    np.testing.assert_allclose(got, A @ x, rtol=1e-10)
    assert set(D.layouts["spmv"]) == {"bsr:2x2"}


# -- a battery of user-style programs (session 47) ---------------------------------


def test_a_matrix_persisted_on_another_client_runs_there(exe) -> None:
    """``D.persist(c2)`` made the partitions on c2 but kept c1 as the matrix's client:
    after c1 closed, the hint's own fix still said "the Dask client is closed", and
    with both alive every map lost its dependencies."""
    A = power_law(120, 90, seed=21)
    x = np.random.default_rng(21).standard_normal(90)
    clusters = [
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                 dashboard_address=":0")
        for _ in range(2)
    ]  # fmt: skip
    first, second = (distributed.Client(c, set_as_default=False) for c in clusters)
    try:
        D = sd.from_scipy(A, parts=3, client=first)
        np.testing.assert_allclose(first.compute(sd.map(exe, "spmv", D, x)).result(), A @ x)
        assert D.persist(second) is D
        assert D.client is second
        np.testing.assert_allclose(second.compute(sd.map(exe, "spmv", D, x)).result(), A @ x)
        first.close()
        np.testing.assert_allclose(second.compute(sd.map(exe, "spmv", D, x)).result(), A @ x)
    finally:
        for c in (first, second, *clusters):
            c.close()


def test_a_distributed_matrix_pickles_without_its_client(client, exe) -> None:
    """Its client field (a live connection) made pickle and client.submit(f, D) fail
    with a TypeError about asyncio."""
    import cloudpickle

    A = power_law(60, 50, seed=22)
    D = sd.from_scipy(A, parts=2, client=client)
    sd.map(exe, "spmv", D, np.ones(50)).compute()  # packed partitions: left behind
    E = cloudpickle.loads(cloudpickle.dumps(D))
    assert E.client is None
    assert not E.packed
    assert E.shape == D.shape
    x = np.random.default_rng(22).standard_normal(50)
    np.testing.assert_allclose(sd.map(exe, "spmv", E, x, client=client).compute(), A @ x)
    assert client.submit(lambda M: M.shape, D).result() == (60, 50)


def test_user_mistakes_with_distributed_matrices_are_explained(client, exe, tmp_path) -> None:
    A = power_law(200, 64, seed=23, heavy=0)
    with pytest.raises(SparsecompError, match=r"from_dask_array takes a dask\.array, not csr"):
        sd.from_dask_array(A, client=client)  # an AttributeError about .chunks
    path = tmp_path / "one.npz"
    sp.save_npz(path, A)
    for one in (str(path), path):  # a str was read as one file per character
        np.testing.assert_allclose(sd.from_files(one, client=client).to_scipy().toarray(),
                                   A.toarray())  # fmt: skip
    np.save(tmp_path / "dense.npy", A.toarray())
    with pytest.raises(SparsecompError, match=r"dense\.npy is a numpy \.npy file"):
        sd.from_files([tmp_path / "dense.npy"], client=client)  # read as Matrix Market
    D = sd.from_scipy(A, parts=2, client=client)
    with pytest.raises(SparsecompError, match=r"'spmv' takes 1 operand\(s\) after the matrix, "
                       r"and map got 0: spmv\(sparse float64"):  # fmt: skip
        sd.map(exe, "spmv", D)
    x = da.from_array(np.ones(128), chunks=32)
    with pytest.raises(SparsecompError, match="sizes are unknown") as info:
        sd.map(exe, "spmv", D, x[x > 0])  # it said "nan rows"
    assert "compute_chunk_sizes" in str(info.value.hint)


def test_a_partitions_layout_error_names_the_matrix_row(client) -> None:
    """The partition's own row number ("row 50" for row 150) under a prefix that
    names the matrix's rows."""
    dense = np.zeros((200, 64))
    dense[:, 0] = 1.0
    dense[150, :4] = 1.0  # four nonzeros in one group of four: not 2:4
    nm = sparsecomp.compile(
        (REPO / "examples" / "spmv.mlir").read_text().replace("f32", "f64")
    )
    D = sd.from_scipy(sp.csr_matrix(dense), parts=2, client=client)
    with pytest.raises(SparsecompError, match=r"partition 1 \(rows \d+:200\): .*row 150\b"):
        sd.map(nm, "spmv", D, np.ones(64), layout="nm:2:4").compute()


def test_a_dead_workers_directory_is_swept(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each worker wrote its shipped executables to a directory of its pid, never
    removed (700 of them, 1.9 GB, had piled up in /tmp)."""
    ship = importlib.import_module("sparsecomp.dask.ship")  # not sd.ship, the function
    monkeypatch.setattr(ship.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(ship, "_OWN", None)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f"sparsecomp-worker-{int(dead.stdout)}"
    (stale / "abc").mkdir(parents=True)
    live = tmp_path / f"sparsecomp-worker-{os.getppid()}"
    live.mkdir()
    own = ship._own_directory()
    assert own == tmp_path / f"sparsecomp-worker-{os.getpid()}"
    assert not stale.exists()
    assert live.exists()


def test_subpackages_without_an_import_of_their_own() -> None:
    """docs/dask.md's ``dataclasses.replace(sparsecomp.targets.cpu.detect_host(),
    threads=1)`` as the first compile's argument: AttributeError."""
    code = (
        "import dataclasses, sparsecomp; "
        "print(dataclasses.replace(sparsecomp.targets.cpu.detect_host(), threads=1).threads)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
