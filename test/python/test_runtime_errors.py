"""sparsecomp.runtime rejects bad calls and bad kernel directories, with clear messages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from runtime_kernels import ADD, ADD_ABIS, KERNEL_ABIS, KERNELS, kernel_dir, write_manifest
from sparsecomp import SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import Executable, UnknownFunctionError, load
from sparsecomp.runtime.results import trusted_tensor


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Executable:
    return load(kernel_dir(tmp_path_factory.mktemp("kernels"), KERNELS, KERNEL_ABIS))


@pytest.fixture(scope="module")
def add_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kernel_dir(tmp_path_factory.mktemp("add"), ADD, ADD_ABIS)


def csr() -> sp.csr_matrix:
    return sp.csr_matrix(sp.random(4, 5, density=0.5, format="csr", dtype=np.float32))


F32 = np.zeros((2, 3), np.float32)
X5 = np.zeros(5, np.float32)


def test_numpy_scalars_of_another_dtype_pass_as_their_values(exe: Executable) -> None:
    """np.int32(3) for an int64 argument and np.float64(1) for a float32 one were refused
    ("expected dtype"), where 3 and 1.0 pass, and a Python kernel takes them."""
    assert bool(exe.less(np.float64(1), 2.0)) is True
    assert bool(exe.less(np.int16(3), np.float32(2.5))) is False
    first, second = exe.twice(np.int32(3))
    assert first.shape == second.shape == (3,)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda e: e.spmv(csr(), X5.astype(np.float64)),
            r"spmv: argument 1 \(dense float32\[k\]\): expected dtype float32, got float64",
        ),
        (
            lambda e: e.spmv(csr().astype(np.float64), X5),
            r"spmv: argument 0 \(sparse float32\[m, k\] csr\): expected dtype float32, got float64",
        ),
        (
            lambda e: e.spmv(SparseTensor.from_scipy(csr().astype(np.float64)), X5),
            r"argument 0 .*: expected dtype float32, got float64",
        ),
        (
            lambda e: e.spmv(csr(), X5[:4]),
            r"size 4 in dimension 0 does not match size symbol 'k' = 5 "
            r"\(from argument 0 dimension 1\)",
        ),
        (lambda e: e.spmv(csr(), np.zeros((5, 1), np.float32)), r"expected rank 1, got rank 2"),
        (lambda e: e.spmv(csr()), r"spmv takes 2 arguments, got 1"),
        (lambda e: e.spmv(csr(), X5, X5), r"spmv takes 2 arguments, got 3"),
        (lambda e: e.spmv(csr().toarray(), X5), r"expected a SparseTensor or scipy.sparse matrix"),
        (lambda e: e.spmv(csr(), list(X5)), r"argument 1 .*expected a numpy array, got list"),
        (
            lambda e: e.total(csr()),
            r"expected a numpy array, got csr_matrix\n  hint: use .to_dense",
        ),
        (
            lambda e: e.spmv(SparseTensor.from_dense(np.ones((2, 2, 2), np.float32), "coo"), X5),
            r"argument 0 .*: expected rank 2, got rank 3",
        ),
        (lambda e: e.views(np.zeros(5)), r"views: argument 0 .*: expected size 6 in dimension 0"),
        (lambda e: e.less("1", 2.0), r"less: argument 0 \(float32\): expected a float32 scalar"),
        (lambda e: e.less(10**400, 2.0), r"less: argument 0 \(float32\): expected a float32"),
        (lambda e: e.less(np.complex64(1), 2.0), r"expected dtype float32, got complex64"),
        (lambda e: e.twice(True), r"expected a int64 scalar, got True"),
        (lambda e: e.twice(2.0), r"expected a int64 scalar, got 2.0"),
        (lambda e: e.twice(2**70), r"expected a int64 scalar"),
        (lambda e: e.twice(np.float64(3)), r"expected a int64 scalar, got 3.0"),
        (lambda e: e.twice(np.uint64(2**63)), r"expected a int64 scalar, got 9223372036854775808"),
        (lambda e: e.half(np.float16(1)), r"half: argument 0 is a float16 scalar"),
        (lambda e: e(X5), r"the kernel has 13 public functions, 'spmv', 'scale', "),
    ],
)
def test_bad_calls_rejected(exe: Executable, call, message: str) -> None:
    with pytest.raises(SparsecompError, match=message):
        call(exe)


def test_size_symbols_checked_across_dense_args(add_dir: Path) -> None:
    add = load(add_dir)
    with pytest.raises(SparsecompError, match=r"argument 1 .*: size 3 in dimension 0 .*'m' = 2"):
        add(F32, F32.T.copy())
    with pytest.raises(
        SparsecompError, match=r"add: argument 0 .*expected dtype float32, got int64"
    ):
        add(np.zeros((2, 3), np.int64), F32)


def test_unknown_function_names(exe: Executable) -> None:
    with pytest.raises(
        UnknownFunctionError, match=r"no public function 'nope'; the kernel has 'spmv'"
    ):
        exe.nope
    with pytest.raises(SparsecompError, match=r"no public function 'nope'"):
        exe.functions["nope"]
    assert not hasattr(exe, "nope")
    assert exe.functions.get("nope") is None
    assert "nope" not in exe.functions


def test_trusted_tensor_rebuilds_composable_and_checks_names() -> None:
    t = SparseTensor.from_scipy(csr(), "hyb")
    named = dict(t.buffers())
    r = trusted_tensor(t.shape, t.layout, t.dtype, named)
    np.testing.assert_array_equal(r.to_dense(), t.to_dense())
    with pytest.raises(SparsecompError, match=r"buffers its layout does not use: \['part9.pos0'\]"):
        trusted_tensor(t.shape, t.layout, t.dtype, {**named, "part9.pos0": named["part0.pos0"]})


def edit_manifest(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    edit(manifest)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(SparsecompError, match=r"is not a compiled kernel: no manifest.json"):
        load(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.update(format=2), r"unsupported manifest format 2, expected 1"),
        (lambda m: m.pop("functions"), r"needs a 'library' name and a 'functions' object"),
        (lambda m: m.update(needs="omp"), r"'needs' must be a list"),
        (lambda m: m.update(needs=["nosuchlib"]), r"unknown runtime library 'nosuchlib'"),
        (lambda m: m.update(library="missing.so"), r"cannot load .*missing.so"),
        (
            lambda m: m["functions"].update(ghost={"symbol": "_mlir_ciface_ghost", "abi": {}}),
            r"has no symbol '_mlir_ciface_ghost'",
        ),
        (
            lambda m: m["functions"]["add"]["abi"]["args"][0].update(dtype="uint16"),
            r"manifest function 'add', argument 0: unsupported dtype 'uint16'",
        ),
        (
            lambda m: m["functions"]["add"]["abi"]["results"][0].update(shape=[-1, 2]),
            r"manifest function 'add', result 0: shape must list sizes",
        ),
        (
            lambda m: m["functions"]["add"]["abi"]["args"][0].update(kind="ragged"),
            r"expected kind dense, scalar or sparse",
        ),
    ],
)
def test_bad_manifests_rejected(add_dir: Path, tmp_path: Path, edit, message: str) -> None:
    with pytest.raises(SparsecompError, match=message):
        load(edit_manifest(add_dir, tmp_path / "k", edit))


def test_manifest_abi_may_be_a_json_string(add_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "k"
    shutil.copytree(add_dir, out)
    write_manifest(out, {})
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["functions"]["add"] = {
        "symbol": "_mlir_ciface_add",
        "abi": json.dumps(ADD_ABIS["add"]),
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    np.testing.assert_array_equal(load(out)(F32 + 1, F32 + 2), F32 + 3)


F16_SPMV = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @spmv(%a: tensor<?x?xf16, #csr>, %x: tensor<?xf16>) -> tensor<?xf16> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f16
  %m = tensor.dim %a, %c0 : tensor<?x?xf16, #csr>
  %e = tensor.empty(%m) : tensor<?xf16>
  %y0 = linalg.fill ins(%z : f16) outs(%e : tensor<?xf16>) -> tensor<?xf16>
  %y = linalg.matvec ins(%a, %x : tensor<?x?xf16, #csr>, tensor<?xf16>)
                     outs(%y0 : tensor<?xf16>) -> tensor<?xf16>
  return %y : tensor<?xf16>
}
"""


def test_float16_kernels_with_scipy_matrices_get_a_hint_that_works(tmp_path: Path) -> None:
    """scipy.sparse has no float16, so '.astype(np.float16)' was a hint no one could
    follow; the hint now names a SparseTensor, and that call runs."""
    import sparsecomp

    program = tmp_path / "f16.mlir"
    program.write_text(F16_SPMV)
    exe = sparsecomp.compile(program)
    a, x = csr(), np.ones(5, np.float16)
    with pytest.raises(SparsecompError) as info:
        exe.spmv(a, x)
    assert "scipy.sparse holds no float16" in (info.value.hint or "")
    t = SparseTensor.from_scipy(a, "csr").with_values(a.data.astype(np.float16))
    np.testing.assert_allclose(exe.spmv(t, x), a @ np.ones(5), rtol=2e-3, atol=2e-3)


#: A reshape whose sizes only the call knows (the check runs in the kernel).
EXPAND = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#CSF = #sparse_tensor.encoding<{ map = (i, j, k) ->
    (i : compressed, j : compressed, k : compressed) }>
func.func @split_rows(%A: tensor<?x?xf64, #CSR>, %q: index) -> tensor<?x3x?xf64, #CSF> {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %A, %c1 : tensor<?x?xf64, #CSR>
  %r = tensor.expand_shape %A [[0, 1], [2]] output_shape [%q, 3, %n]
      : tensor<?x?xf64, #CSR> into tensor<?x3x?xf64, #CSF>
  return %r : tensor<?x3x?xf64, #CSF>
}
"""


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_check_that_fails_in_the_kernel_raises_and_the_process_goes_on(
    native: str, tmp_path: Path
) -> None:
    """The kernel printed the message and called exit(1): the user's Python ended, no
    exception to catch (the C call path and the ctypes one alike)."""
    import subprocess
    import sys
    import textwrap

    source = tmp_path / "expand.mlir"
    source.write_text(EXPAND)
    script = textwrap.dedent(f"""
        import numpy as np, scipy.sparse as sp, sparsecomp
        from sparsecomp.errors import KernelError
        exe = sparsecomp.compile({str(source)!r})
        dense = np.zeros((4, 3, 5)); dense[0, 1, 2] = 1.0; dense[3, 2, 4] = 2.0
        M = sp.csr_matrix(dense.reshape(12, 5))  # int32 indices: a variant, built at the call
        for _ in range(2):
            try:
                exe(M, 5)
            except KernelError as e:
                at = e.location.endswith("expand.mlir:8:8")
                print("raised", at, "product is 15" in e.message)
        print("alive", np.array_equal(exe(M, 4).to_dense(), dense))
    """)
    env = {**__import__("os").environ, "SPARSECOMP_NATIVE_CALLS": native}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["raised True True"] * 2 + ["alive True"], proc.stdout
