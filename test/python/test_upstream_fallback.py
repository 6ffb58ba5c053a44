"""Functions sparse_iter cannot lower go through the upstream sparsifier, same ABI.

Kernels are compiled once per module into a private cache and called with
scipy matrices of several sizes; results are checked against scipy. A
function carrying ``sparse_iter.upstream`` (the mark the import pass sets,
written here by hand) always takes the fallback, so these tests exercise it
whatever sparse_iter's own lowering learns to do; the unmarked variants
check the numbers whichever road they take.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import cpu_kernels
import sparsecomp
from sparsecomp.compiler import upstream
from sparsecomp.errors import ArgumentError, CompileError, SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import Executable

CSR = (
    "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)
ST_CSR = "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>"
MARK = 'attributes {sparse_iter.upstream = "requested by the test"}'
ID2 = "affine_map<(i, j) -> (i, j)>"
SIZES = [(5, 7), (64, 40), (0, 3)]


def elementwise(op: str, sparse_out: bool, mark: str) -> str:
    """``@f(A, B[, O])``: A op B elementwise for two CSR matrices."""
    t = f"tensor<?x?xf32, {CSR}>"
    out_t = t if sparse_out else "tensor<?x?xf32>"
    if sparse_out:
        head = f"func.func @f(%a: {t}, %b: {t}) -> {out_t} {mark} {{"
        init = (
            "%c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
            f"  %m = tensor.dim %a, %c0 : {t}\n  %n = tensor.dim %a, %c1 : {t}\n"
            f"  %o = tensor.empty(%m, %n) : {out_t}"
        )
    else:
        head = f"func.func @f(%a: {t}, %b: {t}, %o: {out_t}) -> {out_t} {mark} {{"
        init = ""
    return f"""
{head}
  {init}
  %r = linalg.generic {{indexing_maps = [{ID2}, {ID2}, {ID2}],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : {t}, {t}) outs(%o : {out_t}) {{
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.{op} %x, %y : f32
    linalg.yield %p : f32
  }} -> {out_t}
  return %r : {out_t}
}}
"""


def spgemm(encoding: str, mark: str) -> str:
    t = f"tensor<?x?xf64, {encoding}>"
    return f"""
func.func @spgemm(%a: {t}, %b: {t}) -> {t} {mark} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : {t}
  %n = tensor.dim %b, %c1 : {t}
  %e = tensor.empty(%m, %n) : {t}
  %r = linalg.matmul ins(%a, %b : {t}, {t}) outs(%e : {t}) -> {t}
  return %r : {t}
}}
"""


#: SpGEMM, then the number of entries of the product: the sparse_tensor op
#: sends it to the sparsifier whatever sparse_iter can lower.
NNZ = f"""
func.func @nnz(%a: tensor<?x?xf64, {ST_CSR}>, %b: tensor<?x?xf64, {ST_CSR}>) -> index {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf64, {ST_CSR}>
  %n = tensor.dim %b, %c1 : tensor<?x?xf64, {ST_CSR}>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, {ST_CSR}>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf64, {ST_CSR}>, tensor<?x?xf64, {ST_CSR}>)
      outs(%e : tensor<?x?xf64, {ST_CSR}>) -> tensor<?x?xf64, {ST_CSR}>
  %k = sparse_tensor.number_of_entries %r : tensor<?x?xf64, {ST_CSR}>
  return %k : index
}}
"""

#: As MLIR's sparse integration tests do: a sparse tensor built in the IR from
#: a dense constant, visited with foreach and printed.
PRINTS = f"""
func.func @main() {{
  %d = arith.constant dense<[[1.0, 0.0, 2.0], [0.0, 0.0, 3.5]]> : tensor<2x3xf64>
  %s = sparse_tensor.convert %d : tensor<2x3xf64> to tensor<2x3xf64, {ST_CSR}>
  sparse_tensor.foreach in %s : tensor<2x3xf64, {ST_CSR}> do {{
  ^bb0(%i: index, %j: index, %v: f64):
    vector.print %v : f64
  }}
  sparse_tensor.print %s : tensor<2x3xf64, {ST_CSR}>
  bufferization.dealloc_tensor %s : tensor<2x3xf64, {ST_CSR}>
  return
}}
"""


pytestmark = pytest.mark.usefixtures("private_cache")


compiled = cpu_kernels.compiled


def went_upstream(exe: Executable, name: str) -> bool:
    stage = exe.directory / "upstream.mlir"  # the module after the upstream stage
    return stage.exists() and f"llvm.func @{name}(" in stage.read_text()


def pair(m: int, n: int, seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Two CSR matrices with different sparsity patterns."""
    a = sp.random(m, n, density=0.3, format="csr", dtype=np.float32, random_state=seed)
    b = sp.random(m, n, density=0.3, format="csr", dtype=np.float32, random_state=seed + 1)
    return a, b


@pytest.mark.parametrize("mark", ["", MARK], ids=["any-road", "fallback"])
@pytest.mark.parametrize("op", ["mulf", "addf"])
def test_elementwise_dense_result(op: str, mark: str) -> None:
    exe = compiled(elementwise(op, sparse_out=False, mark=mark))
    assert went_upstream(exe, "f") or not mark
    for m, n in SIZES:
        a, b = pair(m, n, seed=m)
        want = (a.multiply(b) if op == "mulf" else a + b).toarray()
        got = exe(a, b, np.zeros((m, n), np.float32))
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("mark", ["", MARK], ids=["any-road", "fallback"])
@pytest.mark.parametrize("op", ["mulf", "addf"])
def test_elementwise_sparse_result(op: str, mark: str) -> None:
    exe = compiled(elementwise(op, sparse_out=True, mark=mark))
    assert went_upstream(exe, "f") or not mark
    for m, n in SIZES:
        a, b = pair(m, n, seed=m)
        a_before = a.copy()
        got = exe(a, b)
        want = a.multiply(b) if op == "mulf" else a + b
        assert isinstance(got, SparseTensor)
        assert got.shape == (m, n)
        np.testing.assert_allclose(got.to_scipy().toarray(), want.toarray(), rtol=1e-6)
        assert (a != a_before).nnz == 0  # arguments are read-only


def test_mismatched_shapes_are_refused_before_the_call() -> None:
    exe = compiled(elementwise("mulf", sparse_out=True, mark=MARK))
    a, _ = pair(5, 7, seed=1)
    _, b = pair(6, 7, seed=2)
    with pytest.raises(SparsecompError):
        exe(a, b)


def test_one_program_two_roads(capfd: pytest.CaptureFixture[str]) -> None:
    spmv = f"""
func.func @spmv(%a: tensor<?x?xf32, {CSR}>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {{
  %r = linalg.matvec ins(%a, %x : tensor<?x?xf32, {CSR}>, tensor<?xf32>)
      outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""
    text = spmv + elementwise("mulf", sparse_out=True, mark=MARK)
    exe = sparsecomp.compile(text, cache_results=False, verbose=True)
    assert "sparsecomp: upstream" in capfd.readouterr().err
    assert went_upstream(exe, "f")
    assert not went_upstream(exe, "spmv")
    assert "func.func @spmv" in (exe.directory / "buffers.mlir").read_text()
    a, b = pair(30, 20, seed=3)
    x = np.arange(20, dtype=np.float32)
    np.testing.assert_allclose(exe.spmv(a, x, np.zeros(30, np.float32)), a @ x, rtol=1e-5)
    np.testing.assert_allclose(exe.f(a, b).to_scipy().toarray(), a.multiply(b).toarray())


@pytest.mark.parametrize(
    ("encoding", "mark"),
    [(ST_CSR, ""), (CSR, MARK)],
    ids=["sparse_tensor-any-road", "sparse_iter-fallback"],
)
def test_spgemm(encoding: str, mark: str) -> None:
    """Upstream aborts on SpGEMM in this MLIR build unless i1 buffers are widened."""
    exe, message = None, ""
    try:
        exe = compiled(spgemm(encoding, mark))
    except CompileError as err:
        message = str(err)
    if exe is None:  # acceptable without the mark: a clean error, never a crash
        assert not mark, message
        assert "upstream sparsifier" in message
        return
    for m, k, n in [(6, 5, 4), (50, 40, 30)]:
        a = sp.random(m, k, density=0.2, format="csr", random_state=m)
        b = sp.random(k, n, density=0.2, format="csr", random_state=n)
        np.testing.assert_allclose(exe(a, b).to_scipy().toarray(), (a @ b).toarray())


def test_sparsifier_crash_is_a_located_compile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without i1 widening the sparsifier aborts; the worker dies, not this process."""
    monkeypatch.setenv("SPARSECOMP_COMPILE_IN_PROCESS", "1")  # so that the patch applies
    monkeypatch.setattr(upstream, "OWN_PASSES", "sparse-iter-wrap-upstream,")
    monkeypatch.setattr(upstream, "densified", lambda pipeline: pipeline)  # no last try
    with pytest.raises(CompileError, match=r"crashed \(SIGABRT: Assertion") as info:
        sparsecomp.compile(NNZ, cache_results=False)
    assert "\n<source>:2:1: error: the upstream sparsifier crashed" in str(info.value)
    assert "'nnz' went to the upstream sparsifier: it uses 'sparse_tensor.number_of_entries'" in (
        str(info.value)
    )
    monkeypatch.undo()
    a = sp.random(20, 10, density=0.3, format="csr", random_state=1)
    b = sp.random(10, 15, density=0.3, format="csr", random_state=2)
    assert compiled(NNZ)(a, b) == (a @ b).nnz


def test_print_program_runs_with_sparsecomp_run(tmp_path: Path) -> None:
    program = tmp_path / "print.mlir"
    program.write_text(PRINTS)
    env = {**os.environ, "SPARSECOMP_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(program), "-e", "main"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[:3] == ["1", "2", "3.5"]
    assert "pos[1] : ( 0, 2, 3 )" in done.stdout
    assert "crd[1] : ( 0, 2, 2 )" in done.stdout
    assert "values : ( 1, 2, 3.5 )" in done.stdout


def test_signature_without_sparsecomp_abi_is_compiled_but_not_callable() -> None:
    sliced = (
        "#sparse_tensor.encoding<{ map = (d0 : #sparse_tensor<slice(0, 4, 1)>, "
        "d1 : #sparse_tensor<slice(0, 8, 1)>) -> (d0 : dense, d1 : compressed) }>"
    )
    text = f"""
func.func @nnz(%a: tensor<4x8xf64, {sliced}>) -> index {{
  %n = sparse_tensor.number_of_entries %a : tensor<4x8xf64, {sliced}>
  return %n : index
}}
"""
    exe = sparsecomp.compile(text, cache_results=False)  # compiles; Python cannot call it
    assert "nnz" not in exe.functions
    assert "has no sparsecomp ABI: dimension slices" in exe.functions.uncallable["nnz"]


def test_aos_coo_signature_compiles_uncallable() -> None:
    """AoS COO kept (its buffer is read) in a public signature: the function compiles,
    for the program's own calls, and Python is told why it cannot call it (the whole
    compile was refused)."""
    aos = (
        "#sparse_tensor.encoding<{ map = (d0, d1) -> "
        "(d0 : compressed(nonunique), d1 : singleton) }>"
    )
    text = f"""
func.func @to_coo(%d: tensor<?x?xf64>) -> (tensor<?x?xf64, {aos}>, index) {{
  %s = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, {aos}>
  %c = sparse_tensor.coordinates_buffer %s : tensor<?x?xf64, {aos}> to memref<?xindex>
  %c0 = arith.constant 0 : index
  %n = memref.dim %c, %c0 : memref<?xindex>
  return %s, %n : tensor<?x?xf64, {aos}>, index
}}
"""
    exe = sparsecomp.compile(text, cache_results=False)
    assert "to_coo" not in exe.functions
    why = exe.functions.uncallable["to_coo"]
    assert why.startswith("'to_coo' has no sparsecomp ABI: COO coordinates stored as an array")


#: Reductions the sparsifier's dense outer loop scatters into the output: SpMV over
#: CSC (the loop over columns adds into y at row coordinates) and column sums of CSR
#: (sparse_iter lowers both itself; main programs sent them upstream).
SCATTERS = """
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @mv_csc(%a: tensor<?x?xf64, #CSC>, %b: tensor<?xf64>, %x: tensor<?xf64>)
    -> tensor<?xf64> MARK {
  %0 = linalg.matvec ins(%a, %b : tensor<?x?xf64, #CSC>, tensor<?xf64>)
                     outs(%x : tensor<?xf64>) -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
func.func @colsum(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>) -> tensor<?xf64> MARK {
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%x : tensor<?xf64>) {
    ^bb0(%v: f64, %o: f64):
      %s = arith.addf %o, %v : f64
      linalg.yield %s : f64
  } -> tensor<?xf64>
  return %0 : tensor<?xf64>
}
""".replace("MARK", MARK)


def test_scattered_reductions_run_without_races() -> None:
    """The sparsifier made these outer loops parallel (``dense-outer-loop``) though
    they add into shared elements of y; under OpenMP, sums came out short by up to
    3%, differently at every run (``sparse-iter-sequentialize-racy-loops``)."""
    exe = sparsecomp.compile(SCATTERS, cache_results=False)
    assert went_upstream(exe, "mv_csc")
    assert went_upstream(exe, "colsum")
    a = sp.random(1500, 1200, density=0.5, format="csr", random_state=3)
    b = np.ones(1200)
    for _ in range(3):  # a race loses different updates each time
        y = exe.mv_csc(a.tocsc(), b, np.zeros(1500))
        np.testing.assert_allclose(y, a @ b, rtol=1e-12)
        s = exe.colsum(a, np.zeros(1200))
        np.testing.assert_allclose(s, np.asarray(a.sum(axis=0)).ravel(), rtol=1e-12)


#: Sparse outputs initialized by an argument and read by the body, with inputs that
#: drive the loops (the sparsifier read the output as zero: garbage, silently).
SPARSE_OUTS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id2 = affine_map<(i, j) -> (i, j)>
func.func @scale_by_dense(%a: tensor<?x?xf64>, %x: tensor<?x?xf64, #CSR>)
    -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64>) outs(%x : tensor<?x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %m = arith.mulf %v, %o : f64
    %s = arith.addf %o, %m : f64
    linalg.yield %s : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}
func.func @times_into(%a: tensor<?x?xf64, #CSR>, %x: tensor<?x?xf64, #CSR>)
    -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%x : tensor<?x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %m = arith.mulf %o, %v : f64
    linalg.yield %m : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}
func.func @matmul_acc(%a: tensor<?x?xf64, #CSR>, %b: tensor<?x?xf64, #CSR>,
                      %c: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %d = linalg.matmul ins(%a, %b : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>)
                     outs(%c : tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR>
  return %d : tensor<?x?xf64, #CSR>
}
func.func @negated_into(%a: tensor<?x?xf64, #CSR>, %x: tensor<?x?xf64, #CSR>)
    -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%x : tensor<?x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %n = arith.negf %v : f64
    linalg.yield %n : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}
"""


@pytest.mark.parametrize("shape", [(1, 1), (6, 5), (40, 30)])
def test_sparse_outputs_that_are_arguments(shape: tuple[int, int]) -> None:
    exe = compiled(SPARSE_OUTS)
    m, n = shape
    rng = np.random.default_rng(m)
    a_dense = rng.standard_normal((m, n))
    a = sp.random(m, n, density=0.4, format="csr", random_state=m + 1)
    x = sp.random(m, n, density=0.4, format="csr", random_state=m + 2)
    b = sp.random(n, n, density=0.4, format="csr", random_state=m + 3)
    c = sp.random(m, n, density=0.4, format="csr", random_state=m + 4)
    for _ in range(2):  # the second call may take another path
        got = exe.scale_by_dense(a_dense, x).to_scipy().toarray()
        np.testing.assert_allclose(got, x.toarray() * (1 + a_dense), rtol=1e-12)
        got = exe.times_into(a, x).to_scipy().toarray()
        np.testing.assert_allclose(got, (x.multiply(a)).toarray(), rtol=1e-12)
        got = exe.matmul_acc(a, b, c).to_scipy().toarray()
        np.testing.assert_allclose(got, (c + a @ b).toarray(), rtol=1e-12)
        got = exe.negated_into(a, x).to_scipy().toarray()
        np.testing.assert_allclose(got, -a.toarray(), rtol=1e-12)


CUSTOM_PRODUCT = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @prod_stored(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>) -> tensor<?xf64> {
  %one = arith.constant 1.0 : f64
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%x : tensor<?xf64>) {
  ^bb0(%v: f64, %o: f64):
    %u = sparse_tensor.unary %v : f64 to f64
      present={
        ^bb0(%p: f64):
          sparse_tensor.yield %p : f64
      }
      absent={
        sparse_tensor.yield %one : f64
      }
    %m = sparse_tensor.reduce %u, %o, %one : f64 {
      ^bb0(%p: f64, %q: f64):
        %t = arith.mulf %p, %q : f64
        sparse_tensor.yield %t : f64
    }
    linalg.yield %m : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}
"""


def test_custom_reduction_over_stored_entries() -> None:
    """``sparse_tensor.unary`` + ``reduce`` (a product over stored entries) into a dense
    output: its inputs were densified and the sparsifier then refused the ops."""
    exe = compiled(CUSTOM_PRODUCT)
    a = sp.random(30, 8, density=0.3, format="csr", random_state=5)
    want = np.array([np.prod(a.data[a.indptr[i] : a.indptr[i + 1]]) for i in range(30)])
    np.testing.assert_allclose(exe.prod_stored(a, np.ones(30)), want, rtol=1e-12)


STATIC = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @mm_static(%a: tensor<4x4xf64, #CSR>, %b: tensor<4x4xf64>, %c: tensor<4x4xf64>)
    -> (tensor<4x4xf64>, index) MARK {
  %d = linalg.matmul ins(%a, %b : tensor<4x4xf64, #CSR>, tensor<4x4xf64>)
                     outs(%c : tensor<4x4xf64>) -> tensor<4x4xf64>
  %n = sparse_tensor.number_of_entries %a : tensor<4x4xf64, #CSR>
  return %d, %n : tensor<4x4xf64>, index
}
""".replace("MARK", MARK)


def test_static_sizes_of_the_fallback_are_checked() -> None:
    """The fallback's ABI gave static dimensions size symbols, so a 2x2 matrix passed
    for a 4x4 one was read out of bounds (a segfault) and a 4x1 B gave garbage."""
    exe = compiled(STATIC)
    assert went_upstream(exe, "mm_static")
    a = sp.random(4, 4, density=0.5, format="csr", random_state=1)
    b, c = np.ones((4, 4)), np.zeros((4, 4))
    d, n = exe.mm_static(a, b, c)
    np.testing.assert_allclose(d, a @ b, rtol=1e-12)
    assert n == a.nnz
    with pytest.raises(ArgumentError, match=r"argument 0 .* expected size 4 in dimension 0"):
        exe.mm_static(sp.random(2, 2, density=0.5, format="csr"), np.ones((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ArgumentError, match=r"argument 1 .* expected size 4 in dimension 1"):
        exe.mm_static(a, np.ones((4, 1)), c)


RESHAPES = """
#SV = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed) }>
#DCSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed, d1 : compressed) }>
func.func @expand(%a: tensor<12xf64, #SV>) -> tensor<3x4xf64, #DCSR> {
  %0 = tensor.expand_shape %a [[0, 1]] output_shape [3, 4]
      : tensor<12xf64, #SV> into tensor<3x4xf64, #DCSR>
  return %0 : tensor<3x4xf64, #DCSR>
}
func.func @collapse(%a: tensor<3x4xf64, #DCSR>) -> tensor<12xf64, #SV> {
  %0 = tensor.collapse_shape %a [[0, 1]] : tensor<3x4xf64, #DCSR> into tensor<12xf64, #SV>
  return %0 : tensor<12xf64, #SV>
}
"""


def test_reshapes_of_sparse_tensors_go_upstream() -> None:
    """``tensor.expand_shape`` / ``collapse_shape`` of sparse tensors (MLIR's
    sparse_reshape tests) were refused late, in sparse_iter's buffer stage."""
    exe = compiled(RESHAPES)
    a = sp.random(3, 4, density=0.4, format="csr", random_state=4)
    flat = a.toarray().reshape(12)
    vector = SparseTensor.from_dense(flat, "csr")  # rank 1: one compressed level
    np.testing.assert_array_equal(exe.expand(vector).to_dense(), a.toarray())
    np.testing.assert_array_equal(exe.collapse(a).to_dense(), flat)


#: A static-shape sparse output argument the body does not read (an outer product into
#: a 5x3 CSR): its empty tensor lost the static sizes (a rank-0 sparse type, an internal
#: error "expected non-scalar sparse tensor").
STATIC_OUTER = """
#SV = #sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @outer(%a: tensor<5xf64, #SV>, %b: tensor<3xf64>, %out: tensor<5x3xf64, #CSR>)
    -> tensor<5x3xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<5xf64, #SV>, tensor<3xf64>) outs(%out : tensor<5x3xf64, #CSR>) {
  ^bb0(%x: f64, %y: f64, %o: f64):
    %p = arith.mulf %x, %y : f64
    linalg.yield %p : f64
  } -> tensor<5x3xf64, #CSR>
  return %r : tensor<5x3xf64, #CSR>
}
"""


def test_static_sparse_output_argument() -> None:
    exe = compiled(STATIC_OUTER)
    a, b = np.array([1.0, 0.0, 2.0, 0.0, 3.0]), np.array([1.0, 2.0, 3.0])
    out = sp.random(5, 3, density=0.5, format="csr", random_state=1)  # not read
    got = exe(sp.coo_array(a), b, out).to_dense()
    np.testing.assert_array_equal(got, np.outer(a, b))


#: Bodies the sparsifier should take but crashes on: select(cmpf) of a sparse and a
#: dense operand (an assertion in Sparsification.cpp) and A + v over DCSR and CSC
#: (a segfault). The last try densifies their sparse inputs.
CRASHERS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>
#id = affine_map<(i, j) -> (i, j)>
func.func @select_max(%a: tensor<?x?xf64, #CSR>, %d: tensor<?x?xf64>, %o: tensor<?x?xf64>)
    -> tensor<?x?xf64> {
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %d : tensor<?x?xf64, #CSR>, tensor<?x?xf64>) outs(%o : tensor<?x?xf64>) {
  ^bb0(%x: f64, %y: f64, %z: f64):
    %c = arith.cmpf ogt, %x, %y : f64
    %v = arith.select %c, %x, %y : f64
    linalg.yield %v : f64
  } -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}
func.func @plus_row_dcsr(%a: tensor<4x5xf64, #DCSR>, %v: tensor<5xf64>) -> tensor<4x5xf64> {
  %e = tensor.empty() : tensor<4x5xf64>
  %r = linalg.generic {indexing_maps = [#id, affine_map<(i, j) -> (j)>, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %v : tensor<4x5xf64, #DCSR>, tensor<5xf64>) outs(%e : tensor<4x5xf64>) {
  ^bb0(%x: f64, %y: f64, %z: f64):
    %s = arith.addf %x, %y : f64
    linalg.yield %s : f64
  } -> tensor<4x5xf64>
  return %r : tensor<4x5xf64>
}
func.func @plus_row_csc(%a: tensor<4x5xf64, #CSC>, %v: tensor<5xf64>) -> tensor<4x5xf64> {
  %e = tensor.empty() : tensor<4x5xf64>
  %r = linalg.generic {indexing_maps = [#id, affine_map<(i, j) -> (j)>, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %v : tensor<4x5xf64, #CSC>, tensor<5xf64>) outs(%e : tensor<4x5xf64>) {
  ^bb0(%x: f64, %y: f64, %z: f64):
    %s = arith.addf %x, %y : f64
    linalg.yield %s : f64
  } -> tensor<4x5xf64>
  return %r : tensor<4x5xf64>
}
"""


def test_bodies_the_sparsifier_crashes_on_compile_densified() -> None:
    exe = compiled(CRASHERS)
    rng = np.random.default_rng(3)
    a = sp.random(6, 7, density=0.4, format="csr", random_state=3)
    d = rng.standard_normal((6, 7))
    np.testing.assert_array_equal(
        exe.select_max(a, d, np.zeros((6, 7))), np.maximum(a.toarray(), d)
    )
    b = sp.random(4, 5, density=0.5, format="csr", random_state=4)
    v = rng.standard_normal(5)
    for name in ("plus_row_dcsr", "plus_row_csc"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the conversion to DCSR / CSC
            got = getattr(exe, name)(b, v)
        np.testing.assert_allclose(got, b.toarray() + v, rtol=1e-15)


#: Sparse results the sparsifier cannot build: bodies that do not vanish at zero
#: (max with a dense operand; exp) and a BSR input into a CSR result.
SPARSE_RESULT_CRASHERS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed,
                                                  i mod 2 : dense, j mod 2 : dense) }>
#id = affine_map<(i, j) -> (i, j)>
func.func @max_into_csr(%a: tensor<4x6xf64, #CSR>, %d: tensor<4x6xf64>) -> tensor<4x6xf64, #CSR> {
  %e = tensor.empty() : tensor<4x6xf64, #CSR>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %d : tensor<4x6xf64, #CSR>, tensor<4x6xf64>) outs(%e : tensor<4x6xf64, #CSR>) {
  ^bb0(%x: f64, %y: f64, %o: f64):
    %v = arith.maximumf %x, %y : f64
    linalg.yield %v : f64
  } -> tensor<4x6xf64, #CSR>
  return %r : tensor<4x6xf64, #CSR>
}
func.func @exp_into_csr(%a: tensor<4x6xf64, #CSR>) -> tensor<4x6xf64, #CSR> {
  %e = tensor.empty() : tensor<4x6xf64, #CSR>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x6xf64, #CSR>) outs(%e : tensor<4x6xf64, #CSR>) {
  ^bb0(%x: f64, %o: f64):
    %v = math.exp %x : f64
    linalg.yield %v : f64
  } -> tensor<4x6xf64, #CSR>
  return %r : tensor<4x6xf64, #CSR>
}
func.func @abs_bsr_into_csr(%a: tensor<4x6xf64, #BSR>) -> tensor<4x6xf64, #CSR> {
  %e = tensor.empty() : tensor<4x6xf64, #CSR>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x6xf64, #BSR>) outs(%e : tensor<4x6xf64, #CSR>) {
  ^bb0(%x: f64, %o: f64):
    %v = math.absf %x : f64
    linalg.yield %v : f64
  } -> tensor<4x6xf64, #CSR>
  return %r : tensor<4x6xf64, #CSR>
}
"""


def test_sparse_results_the_sparsifier_cannot_build_compile_densified() -> None:
    exe = compiled(SPARSE_RESULT_CRASHERS)
    a = sp.random(4, 6, density=0.4, format="csr", random_state=5)
    d = np.random.default_rng(5).standard_normal((4, 6))
    np.testing.assert_array_equal(exe.max_into_csr(a, d).to_dense(), np.maximum(a.toarray(), d))
    np.testing.assert_allclose(exe.exp_into_csr(a).to_dense(), np.exp(a.toarray()), rtol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the conversion to BSR
        got = exe.abs_bsr_into_csr(-a).to_dense()
    np.testing.assert_array_equal(got, np.abs(a.toarray()))


_PLUS_COLUMN = """
func.func @kern(%a: tensor<3x4xf32, ENC>) -> tensor<3x4xf32, ENC> {
  %e = tensor.empty() : tensor<3x4xf32, ENC>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<3x4xf32, ENC>) outs(%e : tensor<3x4xf32, ENC>) {
  ^bb0(%x: f32, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %jf = arith.sitofp %ji : i32 to f32
    %v = arith.addf %x, %jf : f32
    linalg.yield %v : f32
  } -> tensor<3x4xf32, ENC>
  return %r : tensor<3x4xf32, ENC>
}
"""


@pytest.mark.parametrize("encoding", [
    "#sparse_tensor.encoding<{map = (i, j) -> (j : dense, i : compressed)}>",
    "#sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed)}>",
])  # fmt: skip
def test_linalg_index_over_csc_reads_the_column(encoding: str) -> None:
    """A + j over CSC came out A + i (the sparsifier, where the body does not vanish)."""
    exe = sparsecomp.compile(_PLUS_COLUMN.replace("ENC", encoding))
    a = np.array([[1, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]], np.float32)
    got = exe(sp.csc_matrix(a)).to_dense()
    np.testing.assert_array_equal(got, a + np.arange(4, dtype=np.float32)[None, :])
