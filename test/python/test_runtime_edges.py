"""The runtime under what users do to it (a battery, session 43): forks while a thread
compiles, executables loaded in a loop, index arrays edited in place, damaged saved
directories, unusable or relative cache directories, ``out=`` memmaps, pickling.

Crash-type cases run in a subprocess: a segfault or a hang must show as a failed
test, not kill the test run. Results are checked against scipy.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime.marshal import c_signature

REPO = Path(__file__).resolve().parents[2]
SPMV = REPO / "examples" / "spmv.mlir"


def _run(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run ``code`` in a fresh interpreter; its stdout (the test fails on a crash)."""
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-3000:]}"
    return run.stdout


@pytest.fixture(scope="module")
def spmv(private_cache: None) -> sparsecomp.Executable:
    return sparsecomp.compile(SPMV)


def _matrix(seed: int = 0) -> sp.csr_matrix:
    return sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=seed)


def test_a_child_forked_while_a_thread_compiles_compiles_too(tmp_path: Path) -> None:
    """Without the daemon each process has a worker of its own: a child forked while
    another thread held its lock (mid-compile) waited forever in its first compile."""
    code = f"""
        import os, signal, threading, time
        import numpy as np, scipy.sparse as sp, sparsecomp
        def program(c):
            return open({str(SPMV)!r}).read().replace("0.0 : f32", f"{{c}} : f32")
        sparsecomp.compile(program(1.5))
        A = sp.random(30, 40, density=0.2, format="csr", dtype=np.float32, random_state=1)
        x = np.ones(40, np.float32)
        for attempt in range(2):
            t = threading.Thread(target=sparsecomp.compile, args=(program(2.5 + attempt),))
            t.start()
            time.sleep(0.05)
            pid = os.fork()
            if pid == 0:
                signal.alarm(60)
                got = sparsecomp.compile(program(7.5 + attempt))(A, x)
                os._exit(0 if np.allclose(got, A @ x + 7.5 + attempt) else 3)
            _, status = os.waitpid(pid, 0)
            t.join()
            print(status)
    """
    if "0.0 : f32" not in SPMV.read_text():
        pytest.skip("the example's zero constant changed")
    env = {"SPARSECOMP_COMPILE_DAEMON": "0", "SPARSECOMP_CACHE_DIR": str(tmp_path)}
    assert _run(code, env).split() == ["0", "0"]


def test_loading_in_a_loop_makes_no_new_ctypes_types(spmv: sparsecomp.Executable) -> None:
    """Each Function made its own result struct class, which ctypes keeps forever
    (POINTER's cache): ``sparsecomp.load(d)(A, x)`` in a loop grew 5-8 KB a call."""
    sig = spmv.functions["spmv"].signature
    first, second = c_signature(sig), c_signature(sig)
    assert first[2] is second[2]
    assert first[0][0] is second[0][0]


@pytest.mark.parametrize("fmt", ["csc", "coo", "bsr"])
def test_index_arrays_edited_in_place_are_converted_again(
    spmv: sparsecomp.Executable, fmt: str
) -> None:
    """A kept conversion of a CSC/COO/BSR operand served the old structure after its
    index arrays were edited in place (CSR's are checked at every call)."""
    dense = np.array([[1, 0, 0, 2], [0, 3, 0, 0], [0, 0, 4, 0], [5, 0, 0, 0]], np.float32)
    a = sp.csr_matrix(dense).asformat(fmt)
    if fmt == "bsr":
        a = sp.bsr_matrix(dense, blocksize=(2, 2))
    x = np.arange(1, 5, dtype=np.float32)
    np.testing.assert_allclose(spmv(a, x), dense @ x)
    if fmt == "coo":
        a.col[:] = a.col[::-1].copy()
    else:
        a.indices[:] = a.indices[::-1].copy()
    np.testing.assert_allclose(spmv(a, x), a.toarray() @ x)


@pytest.mark.parametrize("fmt", ["coo", "csc"])
def test_an_edit_that_repeats_coordinates_under_a_stale_canonical_flag(
    spmv: sparsecomp.Executable, fmt: str
) -> None:
    """Index arrays edited in place so that coordinates repeat, scipy's
    ``has_canonical_format`` still True: the conversion summed the repeats, and its
    kept gather read slot sums out of bounds (IndexError). Repeats are summed, as
    scipy does."""
    a = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=3)
    a = a.asformat(fmt)
    x = np.arange(40, dtype=np.float32)
    np.testing.assert_allclose(spmv(a, x), a @ x, rtol=1e-5)
    if fmt == "coo":
        a.row[:] = a.row[::-1].copy()
    else:
        a.indices[:] = np.sort(a.indices)  # sorted over all columns: repeats in a column
    assert a.has_canonical_format
    np.testing.assert_allclose(spmv(a, x), a.toarray() @ x, rtol=1e-5)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 3])
    else:
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes(4096) + data[middle + 4096 :])


@pytest.mark.parametrize("how", ["truncated", "zeroed"])
def test_a_damaged_saved_runtime_library_is_refused(
    spmv: sparsecomp.Executable, tmp_path: Path, how: str
) -> None:
    saved = spmv.save(tmp_path / "k")
    libraries = [p for p in saved.iterdir() if p.name.startswith("libomp")]
    if not libraries:
        pytest.skip("no OpenMP runtime saved beside the kernel")
    manifest = json.loads((saved / "manifest.json").read_text())
    assert libraries[0].name in manifest["runtime_sha256"]
    _damage(libraries[0], how)
    out = _run(
        f"""
        import sparsecomp
        try:
            sparsecomp.load({str(saved)!r})
            print("loaded")
        except sparsecomp.SparsecompError as e:
            print("refused:", e)
        """
    )
    assert out.startswith("refused:")
    assert "libomp" in out


def test_an_edited_or_undecodable_manifest_is_refused(
    spmv: sparsecomp.Executable, tmp_path: Path
) -> None:
    saved = spmv.save(tmp_path / "k")
    file = saved / "manifest.json"
    manifest = json.loads(file.read_text())
    np.testing.assert_allclose(
        sparsecomp.load(saved)(_matrix(), np.ones(40, np.float32)), _matrix() @ np.ones(40)
    )
    manifest["functions"]["spmv"]["abi"]["results"][0]["dtype"] = "float64"
    file.write_text(json.dumps(manifest))
    with pytest.raises(SparsecompError, match="changed or damaged"):
        sparsecomp.load(saved)
    file.write_bytes(b'{"format": 1, "library": "\xff\xfe"}')
    with pytest.raises(SparsecompError, match="not text"):
        sparsecomp.load(saved)


def test_a_cache_directory_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(blocker))
    program = SPMV.read_text().replace("0.0 : f32", "0.25 : f32")
    with pytest.raises(SparsecompError, match="compile cache cannot be written"):
        sparsecomp.compile(program)


def test_a_relative_cache_directory_means_the_callers(tmp_path: Path) -> None:
    """The daemon builds in its own working directory: a relative cache directory
    failed every cold build there ("internal compiler error ... FileNotFoundError")."""
    out = _run(
        f"""
        import numpy as np, scipy.sparse as sp, sparsecomp, pathlib
        text = open({str(SPMV)!r}).read().replace("0.0 : f32", "0.125 : f32")
        exe = sparsecomp.compile(text)
        inside = str(exe.directory).startswith(str(pathlib.Path.cwd()))
        print(pathlib.Path("relcache").is_dir(), inside)
        """,
        env={"SPARSECOMP_CACHE_DIR": "relcache"},
        cwd=tmp_path,
    )
    assert out.split() == ["True", "True"]


def test_out_takes_an_ndarray_subclass(spmv: sparsecomp.Executable, tmp_path: Path) -> None:
    a, x = _matrix(3), np.random.default_rng(3).random(40).astype(np.float32)
    mapped = np.memmap(tmp_path / "y", dtype=np.float32, mode="w+", shape=(50,))
    assert spmv(a, x, out=mapped) is mapped  # written into, and returned (not a view)
    np.testing.assert_allclose(mapped, a @ x, rtol=1e-5)


def test_executables_pickle_by_their_directory(spmv: sparsecomp.Executable) -> None:
    """A spawn pool's worker gets ``sparsecomp.load(directory)``; copies share the loaded
    library (they failed on ctypes internals)."""
    a, x = _matrix(4), np.ones(40, np.float32)
    again = pickle.loads(pickle.dumps(spmv))
    np.testing.assert_allclose(again(a, x), a @ x, rtol=1e-5)
    function = pickle.loads(pickle.dumps(spmv.functions["spmv"]))
    np.testing.assert_allclose(function(a, x), a @ x, rtol=1e-5)
    assert copy.deepcopy(spmv) is spmv
    prepared = copy.deepcopy(spmv.prepare(a, "bsr:2x2"))
    np.testing.assert_allclose(spmv(prepared, x), a @ x, rtol=1e-5)


# -- the command-line tools (a battery, session 43) --------------------------------------

BIN = Path(sys.executable).parent


def _tool(name: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [str(BIN / name), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=240,
        env={**os.environ, **(env or {})},
    )


def test_opt_takes_a_path_that_is_not_utf8(tmp_path: Path) -> None:
    """A valid program at a path that is not UTF-8 gave a TypeError traceback."""
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/prog\xff.mlir"))
    odd.write_text(SPMV.read_text())
    run = _tool("sparsecomp-opt", str(odd))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "func.func @spmv" in run.stdout
    assert "Traceback" not in run.stderr


def test_run_and_compile_read_paths_and_stdin(tmp_path: Path) -> None:
    """A name that is no file was parsed as MLIR ("custom op 'prog' is unknown"); '-'
    reads standard input."""
    run = _tool("sparsecomp-run", "prog")
    assert run.returncode == 1
    assert "cannot read prog" in run.stderr
    main = (REPO / "examples" / "main" / "spmv_main.mlir").read_text()
    run = _tool("sparsecomp-run", "-", stdin=main)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "( 17, 20, 52 )" in run.stdout
    out = tmp_path / "k"
    run = _tool("sparsecomp-compile", "-", "-o", str(out), stdin=SPMV.read_text())
    assert run.returncode == 0, run.stderr[-2000:]
    assert (out / "manifest.json").is_file()


def test_explain_takes_a_float64_matrix_market_file(tmp_path: Path) -> None:
    """scipy reads .mtx values as float64: --explain failed for every float32 kernel."""
    import scipy.io

    matrix = tmp_path / "a.mtx"
    scipy.io.mmwrite(str(matrix), sp.random(40, 30, density=0.1, random_state=0))
    out = tmp_path / "k"
    run = _tool("sparsecomp-compile", str(SPMV), "--explain", str(matrix), "-o", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "spmv" in run.stdout


def test_print_python_of_a_zero_dim_extract(tmp_path: Path) -> None:
    """tensor.extract %t[] printed as t[] (no Python)."""
    source = tmp_path / "scalar.mlir"
    source.write_text(
        "func.func @get(%t: tensor<f64>) -> f64 {\n"
        "  %v = tensor.extract %t[] : tensor<f64>\n"
        "  return %v : f64\n}\n"
    )
    run = _tool("sparsecomp-opt", str(source), "--print-python")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "[()]" in run.stdout
    compile(run.stdout, "<printed>", "exec")  # it is Python


def test_a_reproducer_directory_that_cannot_be_written(tmp_path: Path) -> None:
    """The build's own error stays the error (it was 'cannot write the build')."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    source = tmp_path / "extract.mlir"
    source.write_text(
        "#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>\n"
        "func.func @k(%A: tensor<4x4xf64, #csr>) -> f64 {\n"
        "  %c1 = arith.constant 1 : index\n"
        "  %v = tensor.extract %A[%c1, %c1] : tensor<4x4xf64, #csr>\n"
        "  return %v : f64\n}\n"
    )
    run = _tool(
        "sparsecomp-compile", str(source), "-o", str(tmp_path / "k"), "--no-cache",
        env={"SPARSECOMP_REPRODUCER_DIR": str(blocker)},
    )  # fmt: skip
    assert run.returncode == 1
    assert "4:8: error: 'tensor.extract' on a sparse tensor" in run.stderr
    assert "no reproducer" in run.stderr


def test_saving_over_another_kernel_removes_its_stage_files(
    spmv: sparsecomp.Executable, tmp_path: Path
) -> None:
    """Saving a CPU kernel where a CUDA one was saved left that kernel's PTX and cubin
    (and its GPU stages) beside the new library; a file no save wrote stays."""
    dest = tmp_path / "kernel"
    sparsecomp.compile(SPMV, target="cuda:sm_80").save(dest)
    assert {"spmv_kernel.ptx", "gpu.mlir"} <= set(os.listdir(dest))
    (dest / "notes.ptx").write_text("the user's own file")
    spmv.save(dest)
    left = set(os.listdir(dest))
    assert not {"spmv_kernel.ptx", "spmv_kernel.cubin", "gpu.mlir"} & left
    assert {"notes.ptx", "llvm.mlir", "kernel.so"} <= left
    a = sp.random(9, 7, density=0.3, format="csr", dtype=np.float32, random_state=3)
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_allclose(sparsecomp.load(dest)(a, x), a @ x, rtol=1e-5)


def test_a_hand_built_tensor_is_validated_at_its_first_call(spmv: sparsecomp.Executable) -> None:
    """SparseTensor(...) with a coordinate out of range was trusted (its buffers are
    read-only): the kernel read out of bounds (a segfault, or garbage)."""
    code = f"""
        import numpy as np, scipy.sparse as sp, sparsecomp
        from sparsecomp.formats import SparseTensor, parse_layout
        from sparsecomp.formats.storage import Storage
        exe = sparsecomp.compile({str(SPMV)!r})
        a = sp.random(12, 10, density=0.3, format="csr", dtype=np.float32, random_state=1)
        ip, ix = a.indptr.astype(np.int32), a.indices.astype(np.int32)
        good = SparseTensor((12, 10), parse_layout("csr"), np.dtype(np.float32),
                            Storage((None, ip), (None, ix), a.data.copy()))
        x = np.arange(10, dtype=np.float32)
        print(np.allclose(exe(good, x), a @ x, atol=1e-5), good.checked)
        ix = ix.copy()
        ix[0] = 1_000_000
        bad = SparseTensor((12, 10), parse_layout("csr"), np.dtype(np.float32),
                           Storage((None, ip), (None, ix), a.data.copy()))
        for use in (lambda: exe(bad, x), lambda: bad.to("ell")):
            try:
                use()
            except sparsecomp.SparsecompError as e:
                print("refused:", e.message)
    """
    lines = _run(code).splitlines()
    assert lines[0] == "True True"
    assert lines[1:] == ["refused: the csr tensor's index buffers: an index is out of range "
                         "for size 10"] * 2  # fmt: skip


def test_a_shared_tensor_edited_is_checked_before_a_conversion(
    spmv: sparsecomp.Executable,
) -> None:
    """from_scipy(copy=False), then the scipy indices edited: a direct call refused it,
    but .to("ell") and prepare converted the bad index (a segfault at the next call)."""
    a = _matrix(4)
    t = SparseTensor.from_scipy(a, "csr", copy=False)
    a.indices[0] = 100_000_000
    with pytest.raises(SparsecompError, match="out of range"):
        t.to("ell")
    with pytest.raises(SparsecompError, match="out of range"):
        spmv.prepare(t, "ell")


def test_a_tall_matrix_of_few_entries_is_sampled_by_rows() -> None:
    """exe.prepare timed a 5M x 3 matrix of 4 entries whole (each call writing a 5M x 64
    result: 4 s and 1.4 GB to decide)."""
    from sparsecomp.runtime.tournament import SAMPLE_ROWS, sample_rows

    tall = sp.csr_matrix((np.ones(4, np.float32), ([0, 7, 2_000_000, 4_999_999], [0, 1, 2, 0])),
                         shape=(5_000_000, 3))  # fmt: skip
    sample = sample_rows(tall)
    assert sample.shape[0] <= SAMPLE_ROWS
    assert sample.shape[1] == 3
