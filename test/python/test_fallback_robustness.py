"""The upstream fallback and the back end never crash, refuse or race on valid programs.

- OpenMP: fallback kernels (the sparsifier's loops under
  ``dense-outer-loop``, COO / DCSR iterators with scratch buffers) are
  called many times and compared with numpy: a shared scratch buffer gives
  nondeterministic wrong entries.
- Reductions with any associative combiner and elementwise bodies that do
  not vanish at zero compile (dense copies for the sparsifier) and match
  numpy.
- i1 buffers (bool tensors, the deallocation helper's flags) and dialects
  programs use in ``main`` (``ub``, ``complex``) compile; an abort would
  kill the process, so those run in a subprocess.
- Ragged sparsity in a function that goes upstream resolves to CSR.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.compiler import upstream, upstream_worker
from sparsecomp.formats import SparseTensor
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import parse_module
from sparsecomp.targets import detect_host
from sparsecomp.transforms.pipeline import build_pass_manager

LAYOUTS = {
    "csr": "(i, j) -> (i : dense, j : compressed)",
    "coo": "(i, j) -> (i : compressed(nonunique), j : singleton)",
    "dcsr": "(i, j) -> (i : compressed, j : compressed)",
    "nm": "(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])",
}
SV = "#sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 32, crdWidth = 32}>"
MARK = 'attributes {sparse_iter.upstream = "requested by the test"}'
CALLS = 60


def layout(name: str) -> str:
    return f"#sparse_iter.layout<{{map = {LAYOUTS[name]}, posWidth = 32, crdWidth = 32}}>"


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ.setdefault("SPARSECOMP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def two_four(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    """A random matrix with at most 2 nonzeros in each group of 4 along rows."""
    a = np.where(rng.random((m, k)) < 0.5, rng.integers(1, 5, (m, k)), 0).astype(np.float64)
    for g in range(0, k, 4):
        block = a[:, g : g + 4]
        block[np.cumsum(block != 0, axis=1) > 2] = 0
    return a


# -- OpenMP: fallback kernels called many times ------------------------------


PAIRS = [("nm", "coo"), ("nm", "dcsr"), ("csr", "coo"), ("coo", "dcsr")]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_fallback_matmul_is_deterministic_under_openmp(a: str, b: str) -> None:
    """A @ B with operand layouts sparse_iter does not co-iterate (fallback), repeated."""
    mark = MARK if a == "csr" else ""  # csr @ coo might be lowered by sparse_iter one day
    src = f"""
func.func @k(%A: tensor<?x?xf64, {layout(a)}>, %B: tensor<?x?xf64, {layout(b)}>,
             %C: tensor<?x?xf64>) -> tensor<?x?xf64> {mark} {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, {layout(a)}>, tensor<?x?xf64, {layout(b)}>)
                     outs(%C : tensor<?x?xf64>) -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}}"""
    exe = sparsecomp.compile(src)
    rng = np.random.default_rng(1)
    m, k, n = 400, 32, 8
    A = two_four(rng, m, k)
    B = np.where(rng.random((k, n)) < 0.2, rng.integers(1, 5, (k, n)), 0).astype(np.float64)
    C = np.zeros((m, n))
    As, Bs = sp.csr_matrix(A), sp.csr_matrix(B)
    wrong = [int((exe(As, Bs, C) != A @ B).sum()) for _ in range(CALLS)]
    assert wrong == [0] * CALLS


# -- reductions and bodies that do not vanish at zero ------------------------

FLOAT_OPS = {
    "addf": np.sum, "mulf": np.prod, "maximumf": np.max, "minimumf": np.min,
    "maxnumf": np.max, "minnumf": np.min,
}  # fmt: skip
INT_OPS = {
    "addi": np.sum, "muli": np.prod, "maxsi": np.max, "minsi": np.min,
    "andi": np.bitwise_and.reduce, "ori": np.bitwise_or.reduce, "xori": np.bitwise_xor.reduce,
    "maxui": lambda x, axis: np.max(x.view(np.uint64), axis=axis).view(np.int64),
    "minui": lambda x, axis: np.min(x.view(np.uint64), axis=axis).view(np.int64),
}  # fmt: skip
#: name -> (loop dims, output map, iterator types, rank, numpy axis)
SHAPES = {
    "vector": ("(i)", "()", '["reduction"]', 1, 0),
    "all": ("(i, j)", "()", '["reduction", "reduction"]', 2, None),
    "rows": ("(i, j)", "(i)", '["parallel", "reduction"]', 2, 1),
    "cols": ("(i, j)", "(j)", '["reduction", "parallel"]', 2, 0),
}


def reduction(op: str, elt: str, shape: str, out_first: bool) -> str:
    dims, out, iters, rank, _ = SHAPES[shape]
    at = f"tensor<{'?x' * rank}{elt}, {SV if rank == 1 else layout('csr')}>"
    ot = f"tensor<{'' if out == '()' else '?x'}{elt}>"
    args = "%o, %a" if out_first else "%a, %o"
    return f"""
func.func @k(%A: {at}, %C: {ot}) -> {ot} {{
  %r = linalg.generic {{indexing_maps = [affine_map<{dims} -> {dims}>, affine_map<{dims} -> {out}>],
                       iterator_types = {iters}}} ins(%A : {at}) outs(%C : {ot}) {{
  ^bb0(%a: {elt}, %o: {elt}):
    %m = arith.{op} {args} : {elt}
    linalg.yield %m : {elt}
  }} -> {ot}
  return %r : {ot}
}}"""


def sample(rng: np.random.Generator, elt: str, rank: int) -> np.ndarray:
    """Mostly zeros, with a full row and column, a negative full row and an empty row."""
    shape = (37,) if rank == 1 else (37, 23)
    if elt == "i64":
        values = rng.integers(-5, 6, shape)
    else:
        values = rng.choice([-2.5, -1.5, 1.25, 1.5, 2.0], shape)
    dtype = np.int64 if elt == "i64" else np.float64
    d = np.where(rng.random(shape) < 0.3, values, 0).astype(dtype)
    if rank == 2:
        d[3, :] = np.where(d[3, :] == 0, 2, d[3, :])
        d[:, 4] = np.where(d[:, 4] == 0, 3, d[:, 4])
        d[5, :] = 0
        d[7, :] = -np.abs(d[7, :]) - 1
    return d


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize(
    ("elt", "op"), [("f64", op) for op in FLOAT_OPS] + [("i64", op) for op in INT_OPS]
)
def test_reductions_match_numpy(elt: str, op: str, shape: str) -> None:
    """Any associative combiner, over stored entries and implicit zeros alike."""
    exe = sparsecomp.compile(reduction(op, elt, shape, out_first=shape != "cols"))
    reduce = (FLOAT_OPS | INT_OPS)[op]
    _, out, _, rank, axis = SHAPES[shape]
    rng = np.random.default_rng(7)
    for _ in range(8):
        d = sample(rng, elt, rank)
        A = SparseTensor.from_dense(d, SV) if rank == 1 else sp.csr_matrix(d)
        c_shape = () if out == "()" else (d.shape[1 - axis],)
        c = np.asarray(rng.integers(-3, 4, c_shape) + (0.5 if elt == "f64" else 0), d.dtype)
        partial = reduce(d.reshape(-1) if axis is None else d, axis=0 if axis is None else axis)
        want = reduce(np.stack([c, np.asarray(partial, dtype=d.dtype)]), axis=0)
        got = np.asarray(exe(A, c))
        np.testing.assert_allclose(got, want, rtol=1e-12)


BODIES = {
    "exp": ("%y = math.exp %a : f64", lambda a, o: np.exp(a)),
    "cos": ("%y = math.cos %a : f64", lambda a, o: np.cos(a)),
    "plus_one": ("%one = arith.constant 1.0 : f64\n    %y = arith.addf %a, %one : f64",
                 lambda a, o: a + 1),
    "out_plus_exp": ("%e = math.exp %a : f64\n    %y = arith.addf %o, %e : f64",
                     lambda a, o: o + np.exp(a)),
}  # fmt: skip


#: (body, reduce rows): every body elementwise; row sums need one that accumulates.
CASES = [(body, False) for body in BODIES] + [("out_plus_exp", True)]


@pytest.mark.parametrize(("body", "reduce_rows"), CASES)
def test_bodies_not_vanishing_at_zero(body: str, reduce_rows: bool) -> None:
    """f(A) into a dense output (or its row sums), with f(0) != 0."""
    at = f"tensor<?x?xf64, {layout('csr')}>"
    ot, omap, iters = (
        ("tensor<?xf64>", "(i)", '["parallel", "reduction"]')
        if reduce_rows
        else ("tensor<?x?xf64>", "(i, j)", '["parallel", "parallel"]')
    )
    src = f"""
func.func @k(%A: {at}, %C: {ot}) -> {ot} {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> {omap}>],
                       iterator_types = {iters}}} ins(%A : {at}) outs(%C : {ot}) {{
  ^bb0(%a: f64, %o: f64):
    {BODIES[body][0]}
    linalg.yield %y : f64
  }} -> {ot}
  return %r : {ot}
}}"""
    exe = sparsecomp.compile(src)
    rng = np.random.default_rng(3)
    for _ in range(CALLS // 4):
        d = np.where(rng.random((41, 29)) < 0.2, rng.uniform(-1, 1, (41, 29)), 0)
        if reduce_rows:
            c = rng.uniform(-1, 1, 41)
            want = c + np.exp(d).sum(axis=1)
        else:
            c = rng.uniform(-1, 1, d.shape)
            want = BODIES[body][1](d, c)
        np.testing.assert_allclose(exe(sp.csr_matrix(d), c), want, rtol=1e-12)


@pytest.mark.parametrize("daemon", [True, False], ids=["daemon", "worker"])
def test_failed_threaded_build_is_retried_sequentially(
    daemon: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sparsifier abort under dense-outer-loop: the job retries without it, in a
    child of the compile daemon (which reports the child's death) or in this process's
    own worker (``SPARSECOMP_COMPILE_DAEMON=0``, started afresh after it dies)."""
    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON", "1" if daemon else "0")
    upstream_worker._shutdown()  # a worker an earlier test of this process left
    ctx = make_context()
    with ctx:
        module = parse_module(reduction("minsi", "i64", "all", True), "k.mlir", ctx)
        build_pass_manager("builtin.module(sparsecomp-cpu-layouts)", ctx).run(module.operation)
        part = upstream.split(module.operation)
        assert part is not None
        out = Path(tempfile.mkdtemp(prefix="sparsecomp-test-"))
        (out / upstream.INPUT).write_text(part.module.operation.get_asm(enable_debug_info=True))
    # Without the densification the threaded sparsifier asserts on this reduction.
    threaded = upstream.pipeline(detect_host()).replace(upstream.DENSIFY, "")
    if "dense-outer-loop" not in threaded:
        pytest.skip("the host target is single-threaded")
    crashed = upstream_worker._run_once(out, "k.mlir", threaded).crash
    assert "SIGABRT" in crashed
    assert "Assertion" in crashed
    assert upstream.sequential(threaded) is not None
    assert upstream_worker.run(out, "k.mlir", threaded).ok  # a new worker
    assert upstream.sequential(upstream.sequential(threaded) or "") is None
    sequential = upstream.sequential(threaded) or ""
    if daemon:  # the daemon's children ran it: no worker of this process's
        assert upstream_worker._worker is None
        assert upstream_worker._run_once(out, "k.mlir", sequential).ok
        return
    # the worker serves the next jobs: its imports are paid once
    assert upstream_worker._worker is not None
    pid = upstream_worker._worker.proc.pid
    assert upstream_worker._run_once(out, "k.mlir", sequential).ok
    assert upstream_worker._worker.proc.pid == pid


# -- crashes that would kill the process: in a subprocess --------------------

I1_STATIC_SPGEMM = f"""
func.func @k(%A: tensor<1x1xf64, {layout("csr")}>, %B: tensor<1x1xf64, {layout("csr")}>,
             %C: tensor<1x1xf64>) -> tensor<1x1xf64> {{
  %r = linalg.matmul ins(%A, %B : tensor<1x1xf64, {layout("csr")}>,
                                 tensor<1x1xf64, {layout("csr")}>)
                     outs(%C : tensor<1x1xf64>) -> tensor<1x1xf64>
  return %r : tensor<1x1xf64>
}}
"""

I1_MAIN = f"""
func.func @spmv(%A: tensor<?x?xf32, {layout("csr")}>, %x: tensor<?xf32>) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, {layout("csr")}>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, {layout("csr")}>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
func.func @main() {{
  %d = arith.constant dense<[[1.0, 0.0, 0.0], [0.0, 2.0, 3.0], [0.0, 0.0, 0.0],
                             [4.0, 0.0, 5.0]]> : tensor<4x3xf32>
  %dd = tensor.cast %d : tensor<4x3xf32> to tensor<?x?xf32>
  %s = "sparse_iter.set_encoding"(%dd) : (tensor<?x?xf32>) -> tensor<?x?xf32, {layout("csr")}>
  %x0 = arith.constant dense<[1.0, 10.0, 100.0]> : tensor<3xf32>
  %x = tensor.cast %x0 : tensor<3xf32> to tensor<?xf32>
  %y = call @spmv(%s, %x) : (tensor<?x?xf32, {layout("csr")}>, tensor<?xf32>) -> tensor<?xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %y[%c0], %pad : tensor<?xf32>, vector<4xf32>
  vector.print %v : vector<4xf32>
  return
}}
"""

BOOL_TENSOR_MAIN = """
func.func @main() {
  %a = arith.constant dense<[1.0, -2.0, 3.0, -4.0]> : tensor<4xf64>
  %k = arith.constant dense<[true, true, false, true]> : tensor<4xi1>
  %e = tensor.empty() : tensor<4xi1>
  %b = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                        affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a, %k : tensor<4xf64>, tensor<4xi1>) outs(%e : tensor<4xi1>) {
  ^bb0(%x: f64, %m: i1, %o: i1):
    %z = arith.constant 0.0 : f64
    %c = arith.cmpf ogt, %x, %z : f64
    %r = arith.andi %c, %m : i1
    linalg.yield %r : i1
  } -> tensor<4xi1>
  %c0 = arith.constant 0 : index
  %f = arith.constant false
  %v = vector.transfer_read %b[%c0], %f : tensor<4xi1>, vector<4xi1>
  vector.print %v : vector<4xi1>
  return
}
"""

VECTOR_2D_MAIN = """
func.func @main() {
  %d = arith.constant dense<[[1.0, 0.0, 2.0], [0.0, 5.0, 3.5]]> : tensor<2x3xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %d[%c0, %c0], %pad : tensor<2x3xf32>, vector<2x3xf32>
  vector.print %v : vector<2x3xf32>
  %z = complex.constant [3.0, 4.0] : complex<f64>
  %abs = complex.abs %z : complex<f64>
  vector.print %abs : f64
  return
}
"""


def _in_subprocess(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPARSECOMP_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip


def test_static_spgemm_compiles(tmp_path: Path) -> None:
    """Static shapes: the deallocation helper's i1 ownership flags are stored as bytes."""
    code = f"import sparsecomp; sparsecomp.compile({I1_STATIC_SPGEMM!r}); print('compiled')"
    proc = _in_subprocess(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compiled" in proc.stdout


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        (I1_MAIN, "( 1, 320, 0, 504 )"),
        (BOOL_TENSOR_MAIN, "( 1, 0, 0, 0 )"),
        (VECTOR_2D_MAIN, "( ( 1, 0, 2 ), ( 0, 5, 3.5 ) )\n5"),
    ],
    ids=["spmv-main", "bool-tensor", "vector-2d-complex"],
)
def test_run_main(program: str, expected: str, tmp_path: Path) -> None:
    """``sparsecomp-run`` on programs with i1 buffers, n-D vectors and complex numbers."""
    source = tmp_path / "prog.mlir"
    source.write_text(program)
    run = Path(sys.executable).with_name("sparsecomp-run")
    env = dict(os.environ, SPARSECOMP_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [str(run), str(source), "-e", "main"],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == expected


# -- layouts of functions that go upstream -----------------------------------


def test_ragged_in_fallback_resolves_to_csr() -> None:
    """ragged sparsity (ELL for sparse_iter) becomes CSR where the sparsifier runs."""
    ragged = "#sparse_iter.sparsity<ragged, density = 0.1>"
    src = f"""
func.func @k(%A: tensor<?x?xf32, {ragged}>, %D: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%A, %D : tensor<?x?xf32, {ragged}>, tensor<?x?xf32>) outs(%D : tensor<?x?xf32>) {{
  ^bb0(%a: f32, %d: f32, %o: f32):
    %s = arith.addf %a, %d : f32
    linalg.yield %s : f32
  }} -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}"""
    exe = sparsecomp.compile(src)
    rng = np.random.default_rng(5)
    a = np.where(rng.random((9, 6)) < 0.3, rng.uniform(-1, 1, (9, 6)), 0).astype(np.float32)
    d = rng.uniform(-1, 1, (9, 6)).astype(np.float32)
    np.testing.assert_allclose(exe(sp.csr_matrix(a), d), a + d, rtol=1e-6)
