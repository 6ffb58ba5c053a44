"""sparsecomp.script: kernels written in Python, checked against scipy / numpy.

The kernels are written here as a user writes them; each is compiled once
(per specialization) and then called on hypothesis' matrices.
"""

from __future__ import annotations

import importlib.util
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erf as scipy_erf

import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.script import ScriptError, Tensor, f32, f64, kernel, sparsity

SETTINGS = settings(max_examples=15, deadline=None)
REPO = Path(__file__).resolve().parents[2]


@kernel
def spmv(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]) -> Tensor[f32, "M"]:
    y[i] += A[i, j] * x[j]
    return y


@kernel
def spmm(
    A: Tensor[f32, ("M", "K"), sparsity("unstructured", density=0.01)],
    B: Tensor[f32, ("K", "N")],
) -> Tensor[f32, ("M", "N")]:
    C[i, j] += A[i, k] * B[k, j]
    return C


@kernel
def sddmm(
    S: Tensor[f32, ("M", "N"), "csr"], X: Tensor[f32, ("M", "K")], Y: Tensor[f32, ("N", "K")]
) -> Tensor[f32, ("M", "N"), "csr"]:
    out[i, j] += S[i, j] * (X[i, k] * Y[j, k])
    return out


@kernel
def scale_relu(A: Tensor["T", ("M", "N"), "csr"], alpha: "T") -> Tensor["T", ("M", "N"), "csr"]:
    B[i, j] = max(alpha * A[i, j], 0.0)
    return B


@kernel
def row_max(A: Tensor[f64, ("M", "N")]) -> Tensor[f64, "M"]:
    m[i] = max(m[i], A[i, j])
    return m


@kernel
def total(A: Tensor[f64, ("M", "N"), "csr"]):
    s += A[i, j] * A[i, j]
    return s


@kernel
def gelu(X: Tensor[f32, ("M", "N")]) -> Tensor[f32, ("M", "N")]:
    Y[i, j] = 0.5 * X[i, j] * (1.0 + erf(X[i, j] * 0.7071067811865476))
    return Y


@kernel
def diagonal(A: Tensor[f32, ("M", "M"), "csr"]) -> Tensor[f32, "M"]:
    d[i] += A[i, j] if i == j else 0.0
    return d


@kernel
def spmm_and_sum(A: Tensor[f32, ("M", "K"), "csr"], B: Tensor[f32, ("K", "N")]):
    C[i, j] += A[i, k] * B[k, j]
    s += C[i, j]
    return C, s


@kernel
def abs_of_product(A: Tensor[f32, ("M", "K"), "csr"], B: Tensor[f32, ("K", "N")]):
    C, _s = spmm_and_sum(A, B)
    D[i, j] = where(C[i, j] > 0.0, C[i, j], -C[i, j])
    return D


@kernel
def batched(
    A: Tensor[
        f32,
        ("B", "M", "K"),
        "#sparse_tensor.encoding<{map = (b, i, j) -> (b : dense, i : dense, j : compressed)}>",
    ],
    X: Tensor[f32, ("B", "K", "N")],
) -> Tensor[f32, ("B", "M", "N")]:
    C[b, i, j] += A[b, i, k] * X[b, k, j]
    return C


@kernel
def widened(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f64, "N"]) -> Tensor[f64, "M"]:
    y[i] += f64(A[i, j]) * x[j]
    return y


@kernel(constants=("N",))
def spmm_static(A: Tensor[f32, ("M", "K"), "csr"], B: Tensor[f32, ("K", "N")]):
    C[i, j] += A[i, k] * B[k, j]
    return C


@kernel
def masked_softmax(
    S: Tensor[f32, ("M", "N"), "csr"], X: Tensor[f32, ("M", "N")]
) -> Tensor[f32, ("M", "N"), "csr"]:
    m[i] = max(m[i], X[i, j])
    E: Tensor[f32, ("M", "N"), "csr"]
    E[i, j] = S[i, j] * exp(X[i, j] - m[i])
    z[i] += E[i, j]
    P[i, j] = E[i, j] / z[i]
    return P


@kernel
def gcn_layer(
    A: Tensor[f32, ("N", "N"), "csr"],
    X: Tensor[f32, ("N", "C")],
    W: Tensor[f32, ("C", "F")],
    b: Tensor[f32, "F"],
) -> Tensor[f32, ("N", "F")]:
    XW[j, f] += X[j, c] * W[c, f]
    H[i, f] += A[i, j] * XW[j, f]
    Y[i, f] = max(H[i, f] + b[f], 0.0)
    return Y


@kernel
def spgemm(
    A: Tensor[f64, ("M", "K"), "csr"], B: Tensor[f64, ("K", "N"), "csr"]
) -> Tensor[f64, ("M", "N"), "csr"]:
    C[i, j] += A[i, k] * B[k, j]
    return C


@st.composite
def matrices(draw: st.DrawFn, dtype: type = np.float32, square: bool = False) -> sp.spmatrix:
    m = draw(st.integers(1, 40))
    n = m if square else draw(st.integers(1, 40))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    seed = draw(st.integers(0, 2**31))
    fmt = draw(st.sampled_from(["csr", "csc", "coo"]))
    return sp.random(m, n, density=density, format=fmt, dtype=dtype, random_state=seed)


def dense(rng: np.random.Generator, *shape: int, dtype: type = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def as_scipy(result: object) -> np.ndarray:
    return result.to_scipy().toarray() if isinstance(result, SparseTensor) else result


@SETTINGS
@given(A=matrices(), seed=st.integers(0, 2**31))
def test_spmv_matches_scipy(A: sp.spmatrix, seed: int) -> None:
    x = dense(np.random.default_rng(seed), A.shape[1])
    np.testing.assert_allclose(spmv(A, x), A @ x, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(A=matrices(), n=st.integers(1, 20), seed=st.integers(0, 2**31))
def test_spmm_matches_scipy(A: sp.spmatrix, n: int, seed: int) -> None:
    B = dense(np.random.default_rng(seed), A.shape[1], n)
    np.testing.assert_allclose(spmm(A, B), A @ B, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(spmm_static(A, B), A @ B, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(S=matrices(), k=st.integers(1, 12), seed=st.integers(0, 2**31))
def test_sddmm_matches_scipy(S: sp.spmatrix, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X, Y = dense(rng, S.shape[0], k), dense(rng, S.shape[1], k)
    want = S.toarray() * (X @ Y.T)
    np.testing.assert_allclose(as_scipy(sddmm(S, X, Y)), want, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(A=matrices(np.float64), B=matrices(np.float64))
def test_spgemm_matches_scipy(A: sp.spmatrix, B: sp.spmatrix) -> None:
    B = sp.csr_matrix(sp.random(A.shape[1], B.shape[1], density=0.2, random_state=B.nnz))
    want = (sp.csr_matrix(A) @ B).toarray()
    np.testing.assert_allclose(as_scipy(spgemm(A, B)), want, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(A=matrices(np.float64), alpha=st.floats(-4, 4))
def test_elementwise_with_a_type_variable(A: sp.spmatrix, alpha: float) -> None:
    got = as_scipy(scale_relu(A, np.float64(alpha)))
    np.testing.assert_allclose(got, np.maximum(alpha * A.toarray(), 0), atol=1e-12)
    got32 = as_scipy(scale_relu(A.astype(np.float32), np.float32(alpha)))
    np.testing.assert_allclose(got32, np.maximum(alpha * A.toarray(), 0), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(A=matrices(np.float64), seed=st.integers(0, 2**31))
def test_reductions(A: sp.spmatrix, seed: int) -> None:
    D = dense(np.random.default_rng(seed), *A.shape, dtype=np.float64)
    np.testing.assert_allclose(row_max(D), D.max(1))
    np.testing.assert_allclose(total(A), (A.toarray() ** 2).sum(), rtol=1e-10, atol=1e-12)


def test_math_where_and_index_variables() -> None:
    rng = np.random.default_rng(0)
    X = dense(rng, 9, 17)
    np.testing.assert_allclose(gelu(X), 0.5 * X * (1 + scipy_erf(X / np.sqrt(2))), atol=1e-6)
    S = sp.random(13, 13, density=0.3, format="csr", dtype=np.float32, random_state=1)
    np.testing.assert_allclose(diagonal(S), S.diagonal())


@SETTINGS
@given(S=matrices(), seed=st.integers(0, 2**31))
def test_masked_softmax(S: sp.spmatrix, seed: int) -> None:
    """Softmax of dense scores over each row's stored entries (declared sparse steps)."""
    S = sp.csr_matrix(S)
    S.data[:] = 1
    X = dense(np.random.default_rng(seed), *S.shape)
    e = np.where(S.toarray() > 0, np.exp(X - X.max(1, keepdims=True)), 0)
    z = e.sum(1, keepdims=True)
    want = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    np.testing.assert_allclose(as_scipy(masked_softmax(S, X)), want, rtol=1e-5, atol=1e-6)


@SETTINGS
@given(A=matrices(square=True), seed=st.integers(0, 2**31))
def test_gcn_layer(A: sp.spmatrix, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = A.shape[0]
    X, W, b = dense(rng, n, 6), dense(rng, 6, 4), dense(rng, 4)
    want = np.maximum(A @ (X @ W) + b, 0)
    np.testing.assert_allclose(gcn_layer(A, X, W, b), want, rtol=1e-4, atol=1e-5)


def test_several_results_and_kernel_calls() -> None:
    A = sp.random(20, 15, density=0.2, format="csr", dtype=np.float32, random_state=2)
    A.data -= 0.5
    B = dense(np.random.default_rng(1), 15, 6)
    C, s = spmm_and_sum(A, B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, (A @ B).sum(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(abs_of_product(A, B), np.abs(A @ B), rtol=1e-5, atol=1e-5)
    assert "call @spmm_and_sum(" in abs_of_product.mlir
    assert "func.func private @spmm_and_sum" in abs_of_product.mlir


def test_batched_three_dimensional() -> None:
    rng = np.random.default_rng(3)
    A = ((rng.random((3, 8, 6)) < 0.3) * rng.standard_normal((3, 8, 6))).astype(np.float32)
    X = dense(rng, 3, 6, 5)
    layout = "#sparse_iter.layout<{map = (b, i, j) -> (b : dense, i : dense, j : compressed)}>"
    got = batched(SparseTensor.from_dense(A, layout), X)
    np.testing.assert_allclose(got, A @ X, rtol=1e-5, atol=1e-5)


def test_python_numbers_take_the_parameter_type() -> None:
    A = sp.random(9, 7, density=0.4, format="csr", dtype=np.float32, random_state=6)
    A.data -= 0.5
    want = np.maximum(1.5 * A.toarray(), 0)
    np.testing.assert_allclose(as_scipy(scale_relu(A, 1.5)), want, rtol=1e-6)
    assert [k[1] for k in scale_relu._executables].count((("T", "f32"),)) == 1


def test_conversions() -> None:
    A = sp.random(11, 7, density=0.4, format="csr", dtype=np.float32, random_state=4)
    x = np.random.default_rng(4).standard_normal(7)
    np.testing.assert_allclose(widened(A, x), A.astype(np.float64) @ x, rtol=1e-12)


def test_specializations_are_cached() -> None:
    A = sp.random(6, 6, density=0.5, format="csr", dtype=np.float64, random_state=5)
    scale_relu(A, np.float64(1.0))
    scale_relu(A.astype(np.float32), np.float32(1.0))
    keys = list(scale_relu._executables)
    assert sorted(k[1] for k in keys) == [(("T", "f32"),), (("T", "f64"),)]
    scale_relu(A, np.float64(2.0))
    assert list(scale_relu._executables) == keys  # no new compile
    text = str(spmm_static.module(sizes={"N": 16}))
    assert "tensor<?x16xf32>" in text


@pytest.mark.parametrize("name", ["spmv", "spmm", "sddmm"])
def test_same_ir_as_the_mlir_example(name: str) -> None:
    """Written in Python or in MLIR, the kernel is the same stage-I IR (after
    generalizing named ops and sparsecomp-cleanup's canonicalize and cse), but for
    the names the Python kernel gives its sizes (``sparse_iter.size_names``, which
    its size errors use)."""
    from mlir import ir, passmanager

    from sparsecomp.ir.context import make_context
    from sparsecomp.lowering.sizes import drop_names

    def clean(text: str) -> str:
        with make_context():
            module = ir.Module.parse(text)
            pipeline = "builtin.module(linalg-generalize-named-ops,canonicalize,cse)"
            passmanager.PassManager.parse(pipeline).run(module.operation)
            drop_names(module.operation)
            return str(module)

    python = {"spmv": spmv, "spmm": spmm, "sddmm": sddmm}[name]
    assert clean(python.mlir) == clean((REPO / "examples" / f"{name}.mlir").read_text())


def load_kernel(tmp_path: Path, body: str, name: str = "bad") -> object:
    """Define ``body`` (a decorated function) in a fresh module file; return its kernel."""
    path = tmp_path / f"{name}_{abs(hash(body))}.py"
    path.write_text("from sparsecomp.script import *\n" + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


BAD = [
    ("    y[i] = A[i, j]\n", "j appear only on the right", 4, 5),
    (
        "    for q in range(3):\n        pass\n",
        "'For' statements are not in the kernel subset",
        4,
        5,
    ),
    ("    y[i + 1] += A[i, j]\n", "subscript 'i + 1' is not an index variable", 4, 7),
    ("    y[i] += A[i, j] * Q[j]\n", "'Q' is not a tensor argument", 4, 23),
    ("    y[i] += A[i, j] ** 2\n", "is not in the kernel subset", 4, 13),
    ("    y[i] += A[i]\n", "'A' has 2 dimension(s), subscripted with 1", 4, 13),
    ("    y[i] += sqrt(i)\n", "sqrt takes a floating-point value", 4, 13),
    ("    y[i] += A[i, j] * x[j]\n", "operands of types f32 and f64", 4, 13),
]


@pytest.mark.parametrize(("line", "message", "row", "col"), BAD)
def test_errors_point_at_the_python_line(
    tmp_path: Path, line: str, message: str, row: int, col: int
) -> None:
    body = (
        "@kernel\n"
        'def bad(A: Tensor[f32, ("M", "N")], x: Tensor[f64, "N"]) -> Tensor[f32, "M"]:\n'
        f"{line}"
        "    return y\n"
    )
    with pytest.raises(ScriptError) as info:
        _ = load_kernel(tmp_path, body).mlir  # some errors are found when the IR is built
    assert message in info.value.message
    assert info.value.location is not None
    assert info.value.location.endswith(f".py:{row}:{col}"), info.value.location


def test_call_errors(tmp_path: Path) -> None:
    A = sp.random(5, 4, density=0.5, format="csr", dtype=np.float32, random_state=0)
    with pytest.raises(TypeError, match=r"spmv\(\) missing 1 required argument\(s\): 'x'"):
        spmv(A)  # as Python binds a call
    with pytest.raises(ScriptError, match="argument 'x' of 'spmv' is f32, got f64"):
        spmv(A, np.ones(4))
    unbound = load_kernel(
        tmp_path, '@kernel\ndef bad(x: Tensor[f32, "N"], a: "T"):\n    y[i] = x[i]\n    return y\n'
    )
    with pytest.raises(ScriptError, match="nothing else binds type variable 'T'"):
        unbound(np.ones(3, np.float32), 1.0)
    with pytest.raises(SparsecompError, match="has 2 dimension"):
        spmv(A, np.ones((4, 1), np.float32))
    with pytest.raises(ScriptError, match="'again' is not a kernel defined before this one"):
        load_kernel(
            tmp_path,
            '@kernel\ndef again(x: Tensor[f32, "N"]):\n    y = again(x)\n    return y\n',
            name="again",
        )
    scalar_target = (
        '@kernel\ndef bad(x: Tensor[f32, "N"], a: f32):\n    a[i] = x[i]\n    return a\n'
    )
    with pytest.raises(ScriptError, match="'a' is a scalar argument: it has no elements"):
        _ = load_kernel(tmp_path, scalar_target).mlir
    unassigned = '@kernel\ndef bad(x: Tensor[f32, "N"]):\n    y[i] = x[i]\n    return x\n'
    with pytest.raises(ScriptError, match="returns 'x', which it never assigns") as info:
        _ = load_kernel(tmp_path, unassigned).mlir
    assert str(info.value.location).endswith(".py:3:1")
    with pytest.raises(ScriptError, match="needs a Tensor"):
        load_kernel(tmp_path, "@kernel\ndef bad(A):\n    return A\n")
    with pytest.raises(ScriptError, match="type variable"):
        _ = scale_relu.mlir


def test_compiler_diagnostics_name_the_python_line(tmp_path: Path) -> None:
    """An error from a later stage of the compiler names the Python line."""
    k = load_kernel(
        tmp_path,
        "@kernel\n"
        'def exp(A: Tensor[f32, ("M", "N"), "csr"]) -> Tensor[f32, ("M", "N"), "csr"]:\n'
        "    B[i, j] = 2.0 * A[i, j]\n"
        "    return B\n",
        name="exp",
    )
    with pytest.raises(SparsecompError, match=r"\.py:3:1: error: function @exp has the name"):
        k.compile()
    with pytest.raises(ScriptError, match="unknown level format 'sparse'") as info:
        load_kernel(
            tmp_path,
            "@kernel\n"
            'def bad(A: Tensor[f32, "N", "#sparse_iter.layout<{map = (i) -> (i : sparse)}>"]):\n'
            "    s += A[i]\n"
            "    return s\n",
        ).mlir
    assert info.value.location is not None
    assert info.value.location.endswith(".py:3:1")


def test_top_level_name() -> None:
    assert sparsecomp.kernel is kernel


def test_torch_arguments_and_gpu_targets() -> None:
    """torch tensors in (torch.sparse too) and out; the CUDA schedule of the same
    kernel in emulation matches scipy, and its PTX is built for the GPU."""
    torch = pytest.importorskip("torch")
    A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    with warnings.catch_warnings():  # torch: "sparse CSR support is in beta", once
        warnings.simplefilter("ignore")
        At = torch.from_numpy(A.toarray()).to_sparse_csr()
    B = torch.randn(20, 4)
    got = spmm(At, B)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), A @ B.numpy(), rtol=1e-5, atol=1e-5)
    emulated = spmm.compile(target="cuda-emu:sm_80").functions["spmm"]
    np.testing.assert_allclose(emulated(A, B.numpy()), A @ B.numpy(), rtol=1e-5, atol=1e-5)
    gpu = spmm.compile(target="cuda:sm_90")
    ptx = [p for p in Path(gpu.directory).iterdir() if p.suffix == ".ptx"]
    assert ptx
    assert ".entry" in ptx[0].read_text()


SCALE = 0.5


@kernel
def scaled(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
    y[i] = SCALE * x[i] + i
    return y


def test_module_constants_are_numbers() -> None:
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_allclose(scaled(x), 0.5 * x + np.arange(5))
    assert "5.000000e-01" in scaled.mlir


def test_benchmark_against_mlir_quick() -> None:
    """benchmarks/script_vs_mlir.py --quick: the two results agree on every row."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "script_vs_mlir.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| s")]
    assert len(rows) == 9
    assert not any("WRONG" in row for row in rows)
