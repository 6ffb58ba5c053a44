"""Runtime robustness: shutdown, edited buffers, duplicates, huge dimensions, index widths.

Crash-type cases run in a subprocess: a segfault must show as a failed
test, not kill the test run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.errors import FormatError, SparsecompError
from sparsecomp.formats import SparseTensor, parse_layout

SPMV = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                           posWidth = 32, crdWidth = 32}>
func.func @spmv(%A: tensor<?x?xf64, #csr>, %x: tensor<?xf64>) -> tensor<?xf64> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f64
  %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
  %e = tensor.empty(%m) : tensor<?xf64>
  %y = linalg.fill ins(%zero : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf64, #csr>, tensor<?xf64>)
                     outs(%y : tensor<?xf64>) -> tensor<?xf64>
  return %r : tensor<?xf64>
}
"""

# The sum of all entries of a matrix in layout #L (a scalar result: no dense
# operand as large as the matrix's dimensions).
TOTAL = """
#L = LAYOUT
func.func @total(%A: tensor<?x?xf64, #L>) -> tensor<f64> {
  %zero = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<f64>
  %s = linalg.fill ins(%zero : f64) outs(%e : tensor<f64>) -> tensor<f64>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%A : tensor<?x?xf64, #L>) outs(%s : tensor<f64>) {
    ^bb0(%a: f64, %acc: f64):
      %t = arith.addf %a, %acc : f64
      linalg.yield %t : f64
  } -> tensor<f64>
  return %r : tensor<f64>
}
"""
CSC32 = (
    "#sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)
HUGE = 2**31 + 5  # rows: more than 32-bit coordinates can name


def run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARSECOMP_CACHE_DIR": os.environ.get("SPARSECOMP_CACHE_DIR", "")}
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def spmv(private_cache: None) -> sparsecomp.Executable:
    return sparsecomp.compile(SPMV)


def matrix(seed: int = 0, shape: tuple[int, int] = (40, 30)) -> sp.csr_matrix:
    return sp.random(*shape, density=0.2, format="csr", dtype=np.float64, random_state=seed)


# -- 1. a kernel result freed by the garbage collector at interpreter exit ----------------------


def test_result_in_a_cycle_is_freed_silently_at_exit(
    spmv: sparsecomp.Executable, tmp_path: Path
) -> None:
    done = run_python(
        f"""
        import numpy as np, scipy.sparse as sp, sparsecomp
        exe = sparsecomp.load({str(spmv.directory)!r})
        for n in (4, 1000):  # small and large (mmap-ed) blocks
            y = exe(sp.csr_matrix(np.eye(n)), np.ones(n))
            cycle = {{"y": y}}
            cycle["self"] = cycle
            del y, cycle
        print("ok")
        """,
        tmp_path,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


# -- 2. buffers edited after a call ------------------------------------------------------------


@pytest.mark.parametrize("buffer", ["pos1", "crd1"])
def test_checked_tensor_index_buffers_are_read_only(
    spmv: sparsecomp.Executable, tmp_path: Path, buffer: str
) -> None:
    done = run_python(
        f"""
        import numpy as np, scipy.sparse as sp, sparsecomp
        from sparsecomp.formats import SparseTensor
        exe = sparsecomp.load({str(spmv.directory)!r})
        a = sp.random(50, 40, density=0.2, format="csr", random_state=0)
        t = SparseTensor.from_scipy(a, exe.spmv.signature.args[0].layout)
        x = np.ones(40)
        assert np.allclose(exe(t, x), a @ x)
        try:
            dict(t.buffers())[{buffer!r}][1:] = 10**9
        except ValueError as err:
            print("refused:", err)
        t.values[:] = 2.0  # values stay writable: no value makes a kernel read out of bounds
        assert np.allclose(exe(t, x), (a != 0) @ x * 2)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "refused: assignment destination is read-only" in done.stdout


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("a.indices[0] = 10**6", "an index is out of range"),
        ("a.indices[0] = -1", "an index is out of range"),
        ("a.indptr[1] = 10**6", "indptr/indices lengths are inconsistent|indptr decreases"),
        ("a.indptr[-1] = 1", "indptr/indices lengths are inconsistent"),
    ],
)
def test_shared_scipy_arrays_edited_after_a_call_are_checked_again(
    spmv: sparsecomp.Executable, tmp_path: Path, edit: str, message: str
) -> None:
    done = run_python(
        f"""
        import numpy as np, scipy.sparse as sp, sparsecomp
        from sparsecomp.formats import SparseTensor
        exe = sparsecomp.load({str(spmv.directory)!r})
        a = sp.random(50, 40, density=0.2, format="csr", random_state=0)
        a.indptr = a.indptr.astype(np.int32); a.indices = a.indices.astype(np.int32)
        t = SparseTensor.from_scipy(a, exe.spmv.signature.args[0].layout, copy=False)
        assert t.shared and np.shares_memory(t.coordinates[1], a.indices)
        x = np.ones(40)
        for _ in range(2):
            assert np.allclose(exe(t, x), a @ x)
        {edit}
        try:
            exe(t, x)
        except sparsecomp.SparsecompError as err:
            print("refused:", err)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(f"refused: .*({message})", done.stdout), done.stdout


def test_owned_tensors_are_read_only_in_every_layout() -> None:
    for name in ("csr", "csc", "coo", "dcsr", "ell", "bsr:2x2", "hyb"):
        t = SparseTensor.from_scipy(matrix(), name)
        parts = t.parts or (t,)
        for part in parts:
            for buf in (*part.positions, *part.coordinates):
                assert buf is None or not buf.flags.writeable, name
            assert part.values.flags.writeable


# -- 3. duplicate entries are summed as scipy sums them ----------------------------------------


def duplicated(fmt: str) -> sp.spmatrix:
    rows = np.array([0, 3, 3, 1, 3, 0, 2])
    cols = np.array([1, 2, 2, 0, 2, 1, 4])
    vals = np.arange(1.0, 8.0)
    if fmt == "coo":
        return sp.coo_matrix((vals, (rows, cols)), shape=(4, 5))
    # csr/csc from raw arrays with repeated indices in one row/column
    major, minor = (rows, cols) if fmt == "csr" else (cols, rows)
    order = np.argsort(major, kind="stable")
    size = 4 if fmt == "csr" else 5
    ptr = np.concatenate([[0], np.cumsum(np.bincount(major, minlength=size))])
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return cls((vals[order], minor[order], ptr), shape=(4, 5))


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
@pytest.mark.parametrize("layout", ["csr", "csc", "coo", "dcsr", "ell", "bsr:2x2", "hyb"])
def test_duplicates_are_summed_on_a_copy(fmt: str, layout: str) -> None:
    m = duplicated(fmt)
    assert not m.has_canonical_format
    before = [np.asarray(getattr(m, a)).copy() for a in ("data", "row", "col", "indices")
              if hasattr(m, a)]  # fmt: skip
    t = SparseTensor.from_scipy(m, layout)
    np.testing.assert_array_equal(t.to_dense(), m.toarray())
    after = [np.asarray(getattr(m, a)) for a in ("data", "row", "col", "indices") if hasattr(m, a)]
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(old, new)  # the user's matrix is unchanged


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
def test_kernel_sums_duplicates_like_scipy(spmv: sparsecomp.Executable, fmt: str) -> None:
    m = duplicated(fmt)
    x = np.arange(5.0)
    np.testing.assert_allclose(spmv(m, x), m @ x)


# -- 4. memory proportional to the entries, not to a dimension ---------------------------------


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


ROWS = 2**24  # 16 M rows, 3 entries


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
@pytest.mark.parametrize("layout", ["csc", "coo", "dcsr", "csr"])
def test_packing_tall_matrices_needs_no_per_row_temporaries(fmt: str, layout: str) -> None:
    rows, cols = np.array([0, 5, ROWS - 1]), np.array([1, 2, 9])
    m = sp.coo_matrix((np.array([1.0, 2.0, 3.0]), (rows, cols)), shape=(ROWS, 10)).asformat(fmt)
    own = 4 * (ROWS + 1) if layout == "csr" else 0  # only CSR stores one position per row
    out: list[SparseTensor] = []
    # the input's check runs over indptr in chunks of 2**20 elements (a bool each)
    assert peak_bytes(lambda: out.append(SparseTensor.from_scipy(m, layout))) < own + 2**21
    assert peak_bytes(lambda: out[0].to_coo()) < 2**20
    np.testing.assert_array_equal(out[0].to_coo()[0], [rows, cols])


def test_huge_dimension_in_o_nnz(private_cache: None) -> None:
    m = sp.coo_matrix(
        (np.array([1.0, 2.0, 3.0]), (np.array([0, 5, HUGE - 1]), np.array([1, 2, 9]))),
        shape=(HUGE, 10),
    )
    for name in ("coo", "dcsr", "csc"):
        lay = parse_layout(name, 2).with_widths(64, 64)
        t = SparseTensor.from_scipy(m, lay)
        np.testing.assert_array_equal(t.to_coo()[0], [[0, 5, HUGE - 1], [1, 2, 9]])


# -- 5. the index-width hint works for a caller holding a compiled kernel ----------------------


def test_width_overflow_says_how_to_recompile(
    private_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversion the kernel's widths cannot hold goes to a variant at wider widths;
    where there are no variants (switched off, a loaded executable), the refusal says
    how to compile the kernel for such operands."""
    m = sp.coo_matrix(
        (np.array([1.0, 2.0, 3.0]), (np.array([0, 5, HUGE - 1]), np.array([1, 2, 9]))),
        shape=(HUGE, 10),
    )
    narrow = sparsecomp.compile(TOTAL.replace("LAYOUT", CSC32))
    assert float(narrow(matrix())) == pytest.approx(matrix().sum())
    assert float(narrow(m)) == 6.0  # through a variant with 64-bit coordinates
    monkeypatch.setenv("SPARSECOMP_SPECIALIZE", "0")
    with pytest.raises(SparsecompError, match="does not fit 32-bit coordinates") as info:
        narrow(m)
    hint = info.value.hint
    assert hint is not None
    wide = hint.split("written as ", 1)[1]
    assert "crdWidth = 64" in wide
    again = sparsecomp.compile(TOTAL.replace("LAYOUT", wide))
    assert float(again(m)) == 6.0


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "an empty program"),
        ("   \n", "an empty program"),
        ("/no/such/dir/spmv.mlri", "cannot read /no/such/dir/spmv.mlri: No such file"),
        ("/tmp", "cannot read /tmp: Is a directory"),
    ],
)
def test_compile_names_a_bad_source(source: str, message: str) -> None:
    """A mistyped path was parsed as MLIR ('expected operation name in quotes'), and an
    empty string compiled to an executable with no functions."""
    with pytest.raises(SparsecompError, match=message):
        sparsecomp.compile(source)


def test_compile_refuses_an_empty_file(tmp_path: Path) -> None:
    """An empty file compiled to an executable with no functions; empty text was refused."""
    path = tmp_path / "empty.mlir"
    path.write_text("\n")
    with pytest.raises(SparsecompError, match=r"empty.mlir holds no program"):
        sparsecomp.compile(path)


def test_compile_names_a_file_that_is_not_text(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 raised UnicodeDecodeError from deep in the driver."""
    path = tmp_path / "bad.mlir"
    path.write_bytes(b"func.func @f() {\n  return\n}\n\xff\n")
    with pytest.raises(SparsecompError, match=r"cannot read .*bad.mlir: it is not UTF-8 text"):
        sparsecomp.compile(path)
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "it is not UTF-8 text" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("fmt", "layout", "message"),
    [
        ("csr", "csc", "invalid scipy csr matrix: an index is out of range for size 53"),
        ("csc", "csr", "invalid scipy csc matrix: an index is out of range for size 37"),
        ("csr", "bsr:4x4", "invalid scipy csr matrix: an index is out of range"),
        ("coo", "csr", "invalid scipy coo matrix: an index of axis 1 is out of range"),
    ],
)
def test_bad_scipy_indices_are_refused_before_scipy_converts(
    fmt: str, layout: str, message: str
) -> None:
    """A bad index reached scipy's own conversion (``tocsc``, ``sum_duplicates``) first,
    which wrote out of bounds: heap corruption, a segfault, or an entry silently lost."""
    a = sp.random(37, 53, density=0.15, format="csr", random_state=4)
    if fmt == "csr":
        a.indices[5] = 56  # column 56 of 53
    elif fmt == "csc":
        a = a.tocsc()
        a.indices[5] = 40  # row 40 of 37
    else:
        a = a.tocoo()
        a.col[5] = 56
    with pytest.raises(FormatError, match=message):
        SparseTensor.from_scipy(a, layout)


#: A dynamic-shape matrix reduced into an output of static shape: every row writes
#: one of the 5 elements, so a matrix of another row count wrote past their end.
STATIC_ROW_SUMS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @rowsums(%A: tensor<?x?xf64, #CSR>) -> tensor<5xf64> {
  %z = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<5xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<5xf64>) -> tensor<5xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%A : tensor<?x?xf64, #CSR>) outs(%f : tensor<5xf64>) {
  ^bb0(%a: f64, %o: f64):
    %v = arith.addf %o, %a : f64
    linalg.yield %v : f64
  } -> tensor<5xf64>
  return %r : tensor<5xf64>
}
"""


def test_static_output_sizes_are_checked_against_dynamic_operands(tmp_path: Path) -> None:
    """The loop a static output dimension shares with an argument's dynamic one fixes
    that one: a 2000-row matrix is refused (it corrupted the heap), a 5-row one runs."""
    code = f"""
import numpy as np, scipy.sparse as sp, sparsecomp
from sparsecomp.errors import ArgumentError
exe = sparsecomp.compile('''{STATIC_ROW_SUMS}''')
assert "float64[5, ?]" in exe.functions["rowsums"].signature.describe()
a = sp.random(5, 50, density=0.5, format="csr", random_state=0)
np.testing.assert_allclose(exe(a), np.asarray(a.sum(axis=1)).ravel(), rtol=1e-12)
for rows in (2000, 4, 0):
    b = sp.random(rows, 50, density=0.5, format="csr", random_state=1)
    try:
        exe(b)
    except ArgumentError as e:
        assert "expected size 5 in dimension 0" in str(e), e
    else:
        raise AssertionError(f"{{rows}} rows were not refused")
print("ok")
"""
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


#: Row sums into an output sized by an index argument: the loop over rows runs to the
#: matrix's row count, so a smaller %m wrote past the output's end.
SIZED_BY_ARGUMENT = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @rowsums(%A: tensor<?x?xf64, #CSR>, %m: index) -> tensor<?xf64> {
  %z = arith.constant 0.0 : f64
  %e = tensor.empty(%m) : tensor<?xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%A : tensor<?x?xf64, #CSR>) outs(%f : tensor<?xf64>) {
  ^bb0(%a: f64, %o: f64):
    %v = arith.addf %o, %a : f64
    linalg.yield %v : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}
"""


def test_index_argument_sizes_are_checked(tmp_path: Path) -> None:
    """An index argument that sizes an output the kernel's loops fill is checked against
    the operand dimension those loops run over, on every call path (the first call's
    and the fast path's); a mismatch corrupted the heap."""
    code = f"""
import numpy as np, scipy.sparse as sp, sparsecomp
from sparsecomp.errors import ArgumentError
exe = sparsecomp.compile('''{SIZED_BY_ARGUMENT}''')
a = sp.random(300, 40, density=0.2, format="csr", random_state=0)
want = np.asarray(a.sum(axis=1)).ravel()
for _ in range(3):  # later calls take the fast path
    np.testing.assert_allclose(exe(a, 300), want, rtol=1e-12)
    for m in (5, 0, 301):
        try:
            exe(a, m)
        except ArgumentError as e:
            assert "does not match size symbol" in str(e), e
        else:
            raise AssertionError(f"m={{m}} was not refused")
print("ok")
"""
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_loading_a_cut_short_library_is_an_error(tmp_path: Path) -> None:
    """A kernel.so cut to half its size: the loader mapped segments past the file's end
    and the process died of SIGBUS; a file given for the directory raised
    NotADirectoryError."""
    code = f"""
import shutil, sparsecomp
from sparsecomp.errors import SparsecompError
exe = sparsecomp.compile('''{SPMV}''')
d = exe.save(r"{tmp_path / "k"}")
lib = d / "kernel.so"
data = lib.read_bytes()
lib.write_bytes(data[: len(data) // 2])
try:
    sparsecomp.load(d)
except SparsecompError as e:
    assert "is cut short" in str(e), e
else:
    raise AssertionError("a cut-short library was loaded")
try:
    sparsecomp.load(lib)
except SparsecompError as e:
    assert "is not a compiled kernel" in str(e), e
print("ok")
"""
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")
