"""Kernels written the way users write them, at the edges (a battery, session 43).

Each test was a bug: a dense operand read past its end, a process killed by an
integer division by zero, a float scalar truncated into an int, and the
diagnostics below. Results are checked against numpy / scipy.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from script_corpus import import_file
from sparsecomp.errors import ArgumentError, SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.script import Tensor, f16, f32, f64, i8, i32
from sparsecomp.script.parse import ScriptError


@sparsecomp.kernel
def dot(x: Tensor[f32, "N"], y: Tensor[f32, "N"]):
    s += x[i] * y[i]
    return s


@sparsecomp.kernel
def matmul(X: Tensor[f32, ("M", "K")], W: Tensor[f32, ("K", "N")]) -> Tensor[f32, ("M", "N")]:
    C[i, j] += X[i, k] * W[k, j]
    return C


def test_dense_operands_sharing_a_symbol_are_checked(private_cache: None) -> None:
    """Size symbols shared only by dense operands: a mismatch is an ArgumentError (the
    kernel read past the shorter array: NaN or garbage)."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3))
    w = w.astype(np.float32)
    np.testing.assert_allclose(matmul(x, w), x @ w, rtol=1e-4, atol=1e-5)
    with pytest.raises(ArgumentError, match="does not match size symbol"):
        matmul(np.ones((2, 1000), np.float32), np.ones((3, 2), np.float32))
    with pytest.raises(ArgumentError, match="does not match size symbol"):
        dot(np.ones(1000, np.float32), np.ones(3, np.float32))


@sparsecomp.kernel
def spmv_named(A: Tensor[f32, ("rows", "cols"), "csr"], x: Tensor[f32, "cols"]):
    y[i] += A[i, j] * x[j]
    return y


def test_size_errors_name_the_symbols_the_kernel_declares(private_cache: None) -> None:
    """A call's size error names the symbol the author wrote (``'cols'``), not the
    compiler's own name for the class (``'s0'``), in the signature and the message."""
    a = sp.random(6, 4, density=0.5, format="csr", dtype=np.float32, random_state=1)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(spmv_named(a, x), a @ x, rtol=1e-5)
    want = r"float32\[cols\]\): size 3 in dimension 0 does not match size symbol 'cols' = 4"
    with pytest.raises(ArgumentError, match=want):
        spmv_named(a, x[:3])
    with pytest.raises(ArgumentError, match=r"size symbol 'N' = 1000"):
        dot(np.ones(1000, np.float32), np.ones(3, np.float32))


DENSE_MM = """
func.func @mm(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>)
                     outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


def test_dense_mlir_program_checks_its_sizes(private_cache: None) -> None:
    """A dense linalg op of a .mlir program: its loops' sizes are checked at the call."""
    exe = sparsecomp.compile(DENSE_MM)
    a, b = np.ones((2, 4), np.float32), np.full((4, 3), 2, np.float32)
    np.testing.assert_array_equal(exe.mm(a, b, np.zeros((2, 3), np.float32)), a @ b)
    with pytest.raises(ArgumentError, match="size 3 in dimension 0"):
        exe.mm(np.ones((2, 1000), np.float32), np.ones((3, 2), np.float32), np.zeros((2, 2)))


def test_one_symbol_twice_in_an_annotation(private_cache: None) -> None:
    """("N", "N") is a square: a 4 x 3 matrix is refused."""

    @sparsecomp.kernel
    def spmv_sq(A: Tensor[f32, ("N", "N"), "csr"], x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
        y[i] += A[i, j] * x[j]
        return y

    square = sp.random(4, 4, density=0.5, format="csr", dtype=np.float32, random_state=1)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(spmv_sq(square, x), square @ x, rtol=1e-6)
    wide = sp.random(4, 3, density=0.5, format="csr", dtype=np.float32, random_state=1)
    with pytest.raises(ArgumentError, match="size 3 in dimension 1"):
        spmv_sq(wide, np.ones(3, np.float32))


def test_declared_result_size_is_checked(private_cache: None) -> None:
    """A result declared of size N, computed over M: the call checks M == N (different
    symbols may be one size, as in jaxtyping; the printer's kernels name every
    dimension with a symbol of its own)."""

    @sparsecomp.kernel
    def rowsum(A: Tensor[f32, ("M", "N")]) -> Tensor[f32, "N"]:
        y[i] += A[i, j]
        return y

    square = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_allclose(rowsum(square), square.sum(axis=1))
    with pytest.raises(ArgumentError, match="size symbol"):
        rowsum(np.ones((6, 5), np.float32))


def test_declared_rank_or_result_count_mismatch_is_located() -> None:
    @sparsecomp.kernel
    def wrong_rank(A: Tensor[f32, ("M", "N")]) -> Tensor[f32, ("M", "N")]:
        y[i] += A[i, j]
        return y

    with pytest.raises(ScriptError, match=r"'y' is declared with 2 dimension\(s\)") as err:
        wrong_rank.mlir
    assert "test_script_edges.py:" in str(err.value)

    @sparsecomp.kernel
    def intermediate(A: Tensor[f32, ("M", "N")]) -> Tensor[f32, "M"]:
        E: Tensor[f32, "M", "csr"]
        E[i, j] = A[i, j] * 2.0
        y[i] += E[i, j]
        return y

    with pytest.raises(ScriptError, match=r"'E' is declared with 1 dimension\(s\)"):
        intermediate.mlir

    @sparsecomp.kernel
    def missing(A: Tensor[f32, ("M", "N")]) -> tuple[Tensor[f32, "M"], Tensor[f32, "N"]]:
        y[i] += A[i, j]
        return y

    with pytest.raises(ScriptError, match=r"declares 2 result\(s\) and returns 1"):
        missing.mlir


def test_integer_division_by_zero_does_not_kill_the_process(tmp_path: Any) -> None:
    """i32 sparse A / B divides A's stored entries by B's implicit zeros: 0 there (as
    numpy's //), and MIN / -1 wraps; the process died of SIGFPE."""
    child = textwrap.dedent(
        """
        import numpy as np, scipy.sparse as sp, sparsecomp
        from sparsecomp.script import Tensor, i32

        @sparsecomp.kernel
        def div(A: Tensor[i32, ("M", "N"), "csr"], B: Tensor[i32, ("M", "N"), "csr"]
                ) -> Tensor[i32, ("M", "N"), "csr"]:
            C[i, j] = A[i, j] / B[i, j]
            return C

        @sparsecomp.kernel
        def rem(a: Tensor[i32, "N"], b: Tensor[i32, "N"]) -> Tensor[i32, "N"]:
            c[i] = a[i] / b[i] + a[i] / b[i]
            return c

        A = sp.csr_matrix(np.array([[4, 6], [0, -8]], np.int32))
        B = sp.csr_matrix(np.array([[2, 0], [0, 0]], np.int32))
        print(div(A, B).to_dense().tolist())
        low = np.iinfo(np.int32).min
        print(rem(np.array([7, low, 5], np.int32), np.array([0, -1, 2], np.int32)).tolist())
        """
    )
    script = tmp_path / "div.py"
    script.write_text(child)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert lines[0] == "[[2, 0], [0, 0]]"
    assert lines[1] == "[0, 0, 4]"  # 7 / 0 = 0; MIN / -1 = MIN, and MIN + MIN wraps to 0


def test_float_or_huge_number_for_an_int_scalar_is_refused(private_cache: None) -> None:
    @sparsecomp.kernel
    def scale(A: Tensor[i32, ("M", "N")], alpha: i32) -> Tensor[i32, ("M", "N")]:
        B[i, j] = alpha * A[i, j]
        return B

    a = np.array([[2, 4, 6]], np.int32)
    np.testing.assert_array_equal(scale(a, 3), a * 3)
    with pytest.raises(ArgumentError, match=r"argument 'alpha': expected an i32 scalar, got 2\.5"):
        scale(a, 2.5)
    with pytest.raises(ArgumentError, match="argument 'alpha'"):
        scale(a, 2**40)


def test_numpy_scalars_pass_as_python_numbers_do(private_cache: None) -> None:
    """``np.int64(3)`` for an i32 parameter was refused ("is i32, got i64") and
    ``np.int32(2)`` for an f32 one, where the Python numbers 3 and 2 pass: numpy
    scalars are numbers passed as their parameter's type, with the same checks."""

    @sparsecomp.kernel
    def scale(A: Tensor[i32, ("M", "N")], alpha: i32) -> Tensor[i32, ("M", "N")]:
        B[i, j] = alpha * A[i, j]
        return B

    @sparsecomp.kernel
    def fscale(A: Tensor[f32, ("M", "N")], alpha: f32) -> Tensor[f32, ("M", "N")]:
        B[i, j] = alpha * A[i, j]
        return B

    a = np.array([[2, 4, 6]], np.int32)
    np.testing.assert_array_equal(scale(a, np.int64(3)), a * 3)
    np.testing.assert_array_equal(scale(a, np.uint8(2)), a * 2)
    np.testing.assert_array_equal(fscale(a.astype(np.float32), np.int32(2)), a * 2.0)
    with pytest.raises(ArgumentError, match=r"expected an i32 scalar, got np\.float64\(2\.5\)"):
        scale(a, np.float64(2.5))
    with pytest.raises(ArgumentError, match="argument 'alpha'"):
        scale(a, np.int64(2**40))


def test_a_list_for_a_tensor_says_to_pass_an_array(private_cache: None) -> None:
    """A list was reported as a 0-d argument (or an f64 one)."""
    with pytest.raises(SparsecompError, match=r"argument 'x' of 'dot' is a list") as info:
        dot([1.0, 2.0], np.ones(2, np.float32))
    assert "np.asarray(x, np.float32)" in str(info.value)


def test_a_0d_value_computed_from_0d_results(private_cache: None) -> None:
    """``n = sqrt(s)`` was "'sqrt' is not a kernel defined before this one" and
    ``mean = s / 4.0`` "assigns no elements"; both are 0-d statements now."""

    @sparsecomp.kernel
    def standardize(x: Tensor[f64, "N"]):
        s += x[i]
        mean = s / 4.0
        y[i] = x[i] - mean
        v += y[i] * y[i]
        sd = sqrt(v)
        z[i] = y[i] / sd
        return z

    x = np.array([1.0, 2.0, 3.0, 6.0])
    y = x - x.mean()
    np.testing.assert_allclose(standardize(x), y / np.sqrt((y * y).sum()))


def _a_kernel_assigning_a_constant() -> Any:
    @sparsecomp.kernel
    def twice(A: Tensor[f32, ("M", "N")]) -> Tensor[f32, ("M", "N")]:
        n = 2.0
        B[i, j] = A[i, j] * n
        return B

    return twice


def test_a_constant_assigned_in_a_kernel_says_where_to_write_it() -> None:
    with pytest.raises(ScriptError, match=r"'n = \.\.\.' assigns no elements and reads no tensor"):
        _a_kernel_assigning_a_constant()


@sparsecomp.kernel
def axpy(x: Tensor[f32, "N"], y: Tensor[f32, "N"], a: f32 = 2.0) -> Tensor[f32, "N"]:
    z[i] = a * x[i] + y[i]
    return z


def test_a_call_inside_a_kernel_binds_as_python_does(private_cache: None) -> None:
    """Defaults, keywords and numbers in a call of another kernel ("takes 3 arguments,
    got 2"; "arguments are plain names, by position")."""

    @sparsecomp.kernel
    def calls(x: Tensor[f32, "N"], y: Tensor[f32, "N"], b: f32) -> Tensor[f32, "N"]:
        u = axpy(x, y)
        v = axpy(y=u, x=x, a=b)
        w = axpy(v, y, -3)
        return w

    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    np.testing.assert_allclose(calls(x, y, 5.0), -3 * (5 * x + (2 * x + y)) + y)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("axpy(x, y, a=x, y=x)", "'axpy' gets 'y' twice"),
        ("axpy(x, y, c=x)", "'axpy' has no parameter 'c'"),
        ("axpy(x)", r"'axpy' takes 3 arguments, got 2 \(no 'y'\)"),
        ("axpy(x, y + y)", "argument 'y \\+ y' is neither a name nor a number"),
        ("axpy(x, 2.0)", "'axpy' takes a tensor as 'y', not a number"),
    ],
)
def test_a_bad_call_inside_a_kernel_is_located(call: str, message: str, tmp_path: Path) -> None:
    source = f"""
import numpy as np
import sparsecomp
from sparsecomp.script import Tensor, f32
from test_script_edges import axpy

@sparsecomp.kernel
def calls(x: Tensor[f32, "N"], y: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
    u = {call}
    return u
calls(np.ones(2, np.float32), np.ones(2, np.float32))
"""
    path = tmp_path / "calls.py"
    path.write_text(source)
    with pytest.raises(ScriptError, match=message) as info:
        import_file(path)
    assert info.value.location.startswith(f"{path}:9:")


def test_a_call_with_another_layout_says_so(private_cache: None) -> None:
    """A csr tensor given for a csc parameter failed verification with both MLIR types."""

    @sparsecomp.kernel
    def spmv_csc(A: Tensor[f32, ("M", "N"), "csc"], x: Tensor[f32, "N"]) -> Tensor[f32, "M"]:
        y[i] += A[i, j] * x[j]
        return y

    @sparsecomp.kernel
    def caller(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]) -> Tensor[f32, "M"]:
        y = spmv_csc(A, x)
        return y

    a = sp.random(6, 5, density=0.3, format="csr", dtype=np.float32, random_state=0)
    with pytest.raises(ScriptError, match="'spmv_csc' takes 'A' as csc, and 'A' here is csr"):
        caller(a, np.ones(5, np.float32))


@sparsecomp.kernel
def frobenius(A: Tensor[f64, ("M", "N"), "csr"]):
    s += A[i, j] * A[i, j]
    return s


@sparsecomp.kernel
def row_sums(A: Tensor[f32, ("M", "N"), "csr"]) -> Tensor[f32, "M"]:
    r[i] += A[i, j]
    return r


def test_a_0d_result_of_a_call_is_read_by_its_name(private_cache: None) -> None:
    """``s = frobenius(A)`` then ``rsqrt(s)`` or ``n = sqrt(s)``: "'s' is not a scalar
    argument" (only ``s[()]`` was read), as a 0-d reduction's result is."""

    @sparsecomp.kernel
    def normalized(A: Tensor[f64, ("M", "N"), "csr"]) -> Tensor[f64, ("M", "N"), "csr"]:
        s = frobenius(A)
        n = sqrt(s)
        B[i, j] = A[i, j] / n
        return B

    a = sp.random(6, 5, density=0.4, format="csr", random_state=2)
    np.testing.assert_allclose(normalized(a).to_dense(), a.toarray() / np.sqrt((a.data**2).sum()))


def test_a_declared_result_size_holds_for_a_calls_result(private_cache: None) -> None:
    """A result declared ``"N"`` that a call returns with ``A``'s rows came back (5,) for
    a 5x4 matrix, unchecked; the call is now refused as a statement's result is."""

    @sparsecomp.kernel
    def col_sums_wrong(A: Tensor[f32, ("M", "N"), "csr"]) -> Tensor[f32, "N"]:
        r = row_sums(A)
        return r

    a = sp.random(5, 4, density=0.5, format="csr", dtype=np.float32, random_state=1)
    with pytest.raises(ArgumentError, match="does not match size symbol"):
        col_sums_wrong(a)
    square = sp.random(4, 4, density=0.5, format="csr", dtype=np.float32, random_state=1)
    np.testing.assert_allclose(col_sums_wrong(square), square.toarray().sum(1), rtol=1e-6)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("axpy(x, y, x)", "'axpy' takes a number as 'a', and 'x' is a tensor"),
        ("axpy(z, z)", "in the call of 'axpy': argument 'x' of 'axpy' is f32, got f64"),
    ],
)
def test_a_call_with_the_wrong_kinds_is_located(call: str, message: str, tmp_path: Path) -> None:
    """A tensor for a scalar parameter was MLIR's verifier text; an f64 tensor for an
    f32 one had no location and a hint for Python callers (.astype)."""
    source = f"""
import numpy as np
import sparsecomp
from sparsecomp.script import Tensor, f32, f64
from test_script_edges import axpy

@sparsecomp.kernel
def calls(x: Tensor[f32, "N"], y: Tensor[f32, "N"], z: Tensor[f64, "N"]) -> Tensor[f32, "N"]:
    u = {call}
    return u
calls(np.ones(2, np.float32), np.ones(2, np.float32), np.ones(2))
"""
    path = tmp_path / "calls.py"
    path.write_text(source)
    with pytest.raises(ScriptError, match=message) as info:
        import_file(path)
    assert info.value.location.startswith(f"{path}:9:")
    assert ".astype" not in str(info.value)


def test_integer_literal_out_of_range_is_located() -> None:
    @sparsecomp.kernel
    def plus(A: Tensor[i8, "N"]) -> Tensor[i8, "N"]:
        B[i] = A[i] + 300
        return B

    with pytest.raises(ScriptError, match="300 is not a value of type i8"):
        plus.mlir


def test_layout_names_take_the_tensors_rank(private_cache: None) -> None:
    """ "coo" on a 3-D annotation is the rank-3 COO (it was the rank-2 one); "csr" on a
    vector its rank-1 form."""

    @sparsecomp.kernel
    def ttv(X: Tensor[f32, ("I", "J", "K"), "coo"], v: Tensor[f32, "K"]) -> Tensor[f32, ("I", "J")]:
        Y[i, j] += X[i, j, k] * v[k]
        return Y

    @sparsecomp.kernel
    def svdot(a: Tensor[f32, "N", "coo"], b: Tensor[f32, "N"]):
        s += a[i] * b[i]
        return s

    rng = np.random.default_rng(0)
    d = rng.standard_normal((4, 5, 6)).astype(np.float32) * (rng.random((4, 5, 6)) < 0.3)
    v = rng.standard_normal(6).astype(np.float32)
    got = ttv(SparseTensor.from_dense(d, "coo"), v)
    np.testing.assert_allclose(got, np.einsum("ijk,k->ij", d, v), rtol=1e-5, atol=1e-6)
    a = (rng.standard_normal(9) * (rng.random(9) < 0.5)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    assert svdot(SparseTensor.from_dense(a, "coo"), b) == pytest.approx(float(a @ b), rel=1e-5)


def test_annotation_mistakes_are_located() -> None:
    @sparsecomp.kernel
    def rank_mismatch(
        A: Tensor[f32, ("M", "N"), "#sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>"],
    ) -> Tensor[f32, "M"]:
        y[i] += A[i, j]
        return y

    with pytest.raises(ScriptError, match="cannot take encoding"):
        rank_mismatch.mlir

    @sparsecomp.kernel
    def negative(A: Tensor[f32, (-1, "N")]) -> Tensor[f32, "N"]:
        y[j] += A[i, j]
        return y

    with pytest.raises(ScriptError, match="sizes are >= 0"):
        negative.mlir


def test_f16_scalar_arguments(private_cache: None) -> None:
    """An f16 scalar (documented) is passed as f32 and rounded on entry (C passes no
    half by value); Python floats and numpy float16 scalars both."""

    @sparsecomp.kernel
    def scale(A: Tensor[f16, ("M", "N"), "csr"], alpha: f16) -> Tensor[f16, ("M", "N"), "csr"]:
        B[i, j] = alpha * A[i, j]
        return B

    dense = np.array([[1, 0, 2], [0, 3, 0]], np.float16)
    a = SparseTensor.from_dense(dense, "csr")
    # 1 + 2^-11 + 2^-40: rounded to f32 first (1 + 2^-11, a tie) and then to f16 it
    # was 1.0, an f16 ulp below numpy's np.float16 of it
    for alpha in (np.float16(2.0), 2.0, 0.1, 1 + 2**-11 + 2**-40):
        got = scale(a, alpha).to_dense()
        np.testing.assert_array_equal(got, np.float16(alpha) * dense)


def test_scalar_max_and_min_reductions(private_cache: None) -> None:
    @sparsecomp.kernel
    def largest(A: Tensor[f32, ("M", "N"), "csr"]):
        s = max(s, A[i, j])
        return s

    @sparsecomp.kernel
    def smallest(A: Tensor[f32, ("M", "N")]):
        s = min(s, A[i, j])
        return s

    m = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=1)
    m.data -= 0.5
    assert largest(m) == m.data.max()  # over the stored entries
    assert smallest(m.toarray()) == m.toarray().min()


def test_diagnostics_name_the_argument_or_the_line() -> None:
    @sparsecomp.kernel
    def spmv(A: Tensor["T", ("M", "N"), "csr"], x: Tensor["T", "N"]) -> Tensor["T", "M"]:
        y[i] += A[i, j] * x[j]
        return y

    a = sp.random(3, 4, density=0.5, format="csr", dtype=np.float32)
    with pytest.raises(SparsecompError, match="argument 'x' of 'spmv': no element type for dtype"):
        spmv(a, np.ones(4, np.uint8))
    with pytest.raises(ScriptError, match="no element type 'f128'"):
        spmv.module(types={"T": "f128"})

    @sparsecomp.kernel
    def count(A: Tensor[f32, ("M", "N")]) -> Tensor[f32, "M"]:
        y[i] += A[i, j] > 0.0
        return y

    with pytest.raises(ScriptError, match="the value is a comparison"):
        count.mlir


HALF = np.float32(0.5)


def test_numpy_scalar_module_constant(private_cache: None) -> None:
    @sparsecomp.kernel
    def halve(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
        y[i] = HALF * x[i]
        return y

    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(halve(x), x * 0.5)


# -- session 44 ----------------------------------------------------------------------


@sparsecomp.kernel
def normalized(x: Tensor[f32, "N"]):
    s += x[i]
    y[i] = x[i] / s
    return y


def test_a_0d_result_is_read_by_its_name(private_cache: None) -> None:
    """``s += x[i]`` then ``y[i] = x[i] / s``: 's' is not a scalar argument or an index
    variable (only ``s[()]`` worked, which no page said)."""
    x = np.arange(1, 5, dtype=np.float32)
    np.testing.assert_allclose(normalized(x), x / x.sum(), rtol=1e-6)


@sparsecomp.kernel
def spmv_named_args(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]):
    y[i] += A[i, j] * x[j]
    return y


def test_a_kernel_takes_named_arguments_and_out(private_cache: None) -> None:
    """A @kernel took neither ``out=`` nor keyword arguments, which the compiled
    function it calls takes."""
    a = sp.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=0)
    x = np.arange(5, dtype=np.float32)
    out = np.empty(6, np.float32)
    assert spmv_named_args(a, x, out=out) is out
    np.testing.assert_allclose(out, a @ x, rtol=1e-6)
    np.testing.assert_allclose(spmv_named_args(x=x, A=a), a @ x, rtol=1e-6)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        spmv_named_args(a, z=x)
    with pytest.raises(TypeError, match="missing 1 required argument"):
        spmv_named_args(A=a)
    with pytest.raises(TypeError, match="multiple values for argument 'A'"):
        spmv_named_args(a, A=a, x=x)


@sparsecomp.kernel
def to_ell(A: Tensor[f32, ("M", "N"), "csr"]) -> Tensor[f32, ("M", "N"), "ell"]:
    B[i, j] = A[i, j]
    return B


@sparsecomp.kernel
def to_ell4(A: Tensor[f32, ("M", "N"), "csr"]) -> Tensor[f32, ("M", "N"), "ell:4"]:
    B[i, j] = A[i, j]
    return B


def test_a_declared_ell_result_comes_back_ell(private_cache: None) -> None:
    """The upstream road holds ELL as CSR, and the result came back CSR (and ``ell:4``
    with rows of 11 entries was not refused)."""
    a = sp.random(16, 24, density=0.3, format="csr", dtype=np.float32, random_state=0)
    got = to_ell(a)
    assert str(got.layout) == "ell"
    np.testing.assert_array_equal(got.to_dense(), a.toarray())
    with pytest.raises(SparsecompError, match="does not fit its declared layout"):
        to_ell4(a)


def test_reductions_and_result_types_written_wrong_are_explained(tmp_path: Path) -> None:
    """``y[i] = y[i] + ...`` and ``max(expr, y[i])`` read the new result ('not a tensor
    argument or an earlier result'); an f64 result of an f32 sum got MLIR's verifier
    message."""
    cases = {
        "y[i] = y[i] + A[i, j] * x[j]": "is the new result this statement defines",
        "y[i] = max(A[i, j] * x[j], y[i])": "is the new result this statement defines",
    }
    for body, message in cases.items():
        text = f"""
            import sparsecomp
            from sparsecomp.script import Tensor, f32
            @sparsecomp.kernel
            def k(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]):
                {body}
                return y
            """
        path = tmp_path / "k.py"
        path.write_text(textwrap.dedent(text))
        with pytest.raises(ScriptError, match=message):
            import_file(path).k.mlir
    typed = """
        import sparsecomp
        from sparsecomp.script import Tensor, f32, f64
        @sparsecomp.kernel
        def k(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]) -> Tensor[f64, "M"]:
            y[i] += A[i, j] * x[j]
            return y
        """
    path = tmp_path / "typed.py"
    path.write_text(textwrap.dedent(typed))
    with pytest.raises(ScriptError, match="the value is f32, but 'y' holds f64") as info:
        import_file(path).k.mlir
    assert "f64(expr)" in (info.value.hint or "")


#: A module number that a kernel's 0-d result of the same name must shadow.
total = 100.0


@sparsecomp.kernel
def normalize_by_total(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
    total += x[i]  # noqa: F823 (index notation: a 0-d result, not the module's total)
    y[i] = x[i] / total
    return y


def test_kernel_reads_follow_python_scoping(private_cache: None) -> None:
    """Session 45's battery: a name the kernel assigns shadows a module number (it read
    the module's 100.0); a reduction reading its target at its own indices reads the
    target's value before the statement (it read the running total); a default
    argument is used where the call leaves it out (it was ignored)."""
    x = np.array([1.0, 3.0], np.float32)
    np.testing.assert_allclose(normalize_by_total(x), x / x.sum())

    @sparsecomp.kernel
    def grow(X: Tensor[f32, ("M", "N")], y: Tensor[f32, "M"]) -> Tensor[f32, "M"]:
        y[i] += y[i] * X[i, j]
        return y

    X, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1.0, 2.0], np.float32)
    np.testing.assert_allclose(grow(X, y), y + y * X.sum(axis=1))

    @sparsecomp.kernel
    def scale(x: Tensor[f32, "N"], alpha: f32 = 2.0) -> Tensor[f32, "N"]:
        y[i] = alpha * x[i]
        return y

    np.testing.assert_allclose(scale(x), 2 * x)
    np.testing.assert_allclose(scale(x=x), 2 * x)
    np.testing.assert_allclose(scale(x, 3.0), 3 * x)


def test_sparse_result_of_product_max_min_starts_from_identity(private_cache: None) -> None:
    """A new sparse result of ``*=``, ``max`` or ``min`` starts from 1, -inf, +inf (it
    started from 0: all zeros); it keeps the nonzeros of the dense result, for the
    layout names and for upstream encodings."""
    upstream = "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>"

    @sparsecomp.kernel
    def prod(X: Tensor[f32, ("M", "N")], Y: Tensor[f32, ("N", "K")]) -> Tensor[
        f32, ("M", "K"), "csr"
    ]:
        C[i, k] *= X[i, j] + Y[j, k]
        return C

    @sparsecomp.kernel
    def most(A: Tensor[f32, ("M", "N"), "csr"], B: Tensor[f32, ("N", "K")]) -> Tensor[
        f32, ("M", "K"), "csr"
    ]:
        C[i, k] = max(C[i, k], A[i, j] * B[j, k])
        return C

    @sparsecomp.kernel
    def least(A: Tensor[f32, ("M", "N"), "csr"], B: Tensor[f32, ("N", "K")]) -> Tensor[
        f32, ("M", "K"), upstream
    ]:
        C[i, k] = min(C[i, k], A[i, j] * B[j, k])
        return C

    rng = np.random.default_rng(3)
    X, Y = rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32), np.zeros((4, 2), np.float32)
    np.testing.assert_allclose(prod(X, Y).to_dense(), np.prod(X, axis=1)[:, None] * [1, 1],
                               rtol=1e-5)  # fmt: skip
    A = sp.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=2)
    B = rng.standard_normal((5, 3)).astype(np.float32)
    products = A.toarray()[:, :, None] * B[None, :, :]  # zeros where A has none, as dense
    np.testing.assert_allclose(most(A, B).to_dense(), products.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(least(A, B).to_dense(), products.min(axis=1), rtol=1e-6)


def test_result_annotations_and_dead_code_are_read_as_written(private_cache: None) -> None:
    """A plain tuple of results is read as ``tuple[...]`` (it was ignored: a declared csr
    result came back dense); a static size in a result sizes it; a statement after the
    return is refused (a later return won)."""

    @sparsecomp.kernel
    def two(A: Tensor[f32, ("M", "N"), "csr"]) -> (Tensor[f32, ("M", "N"), "csr"],
                                                   Tensor[f64, "M"]):  # fmt: skip
        B[i, j] = 2.0 * A[i, j]
        s[i] += f64(A[i, j])
        return B, s

    A = sp.random(4, 5, density=0.5, format="csr", dtype=np.float32, random_state=0)
    B, s = two(A)
    assert isinstance(B, SparseTensor)
    assert s.dtype == np.float64
    np.testing.assert_allclose(B.to_dense(), 2 * A.toarray())
    np.testing.assert_allclose(s, A.toarray().sum(axis=1), rtol=1e-6)

    @sparsecomp.kernel
    def widen(x: Tensor[f32, "N"]) -> Tensor[f32, ("N", 3)]:
        Y[i, k] = x[i] * 1.0
        return Y

    x = np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(widen(x), np.repeat(x[:, None], 3, axis=1))
    with pytest.raises(ScriptError, match="after the kernel's return") as info:

        @sparsecomp.kernel
        def dead(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
            y[i] = x[i] + 1.0
            return y
            z[i] = y[i] * 100.0
            return z

    assert info.value.location.split(":")[-2:] == [str(_line_of("z[i] = y[i] * 100.0")), "13"]


def _line_of(text: str) -> int:
    """The line of this file that holds ``text`` (its first)."""
    return next(n for n, line in enumerate(Path(__file__).read_text().splitlines(), 1)
                if text in line)  # fmt: skip


def test_misread_statements_get_their_own_message(private_cache: None) -> None:
    """``s = max(e, s)``, a call of a @loops function, an undefined name in a string
    annotation (``from __future__ import annotations``, as this file has) and a
    fraction meeting an index variable each say what they are (the first two said
    'not a kernel defined before this one', the third a NameError traceback or a
    type variable)."""
    from sparsecomp.script import loops

    with pytest.raises(ScriptError, match=r"no max reduction: the result comes first"):

        @sparsecomp.kernel
        def gmax(A: Tensor[f32, ("M", "N"), "csr"]):
            s = max(A[i, j], s)
            return s

    @loops
    def twice(x: "tensor<?xf32>") -> "tensor<?xf32>":
        return x

    with pytest.raises(ScriptError, match="'twice' is a @loops function"):

        @sparsecomp.kernel
        def calls(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
            y = twice(x)
            return y

    with pytest.raises(ScriptError, match="name 'f23' is not defined"):

        @sparsecomp.kernel
        def typo(x: Tensor[f32, "N"], alpha: f23) -> Tensor[f32, "N"]:
            y[i] = alpha * x[i]
            return y

    def make(layout: str) -> Any:
        @sparsecomp.kernel
        def rowsum(A: Tensor[f32, ("M", "N"), layout]) -> Tensor[f32, "M"]:
            y[i] += A[i, j]
            return y

        return rowsum

    A = sp.random(4, 5, density=0.5, format="csr", dtype=np.float32, random_state=0)
    np.testing.assert_allclose(make("csr")(A), A.toarray().sum(axis=1), rtol=1e-6)

    @sparsecomp.kernel
    def ramp(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
        y[i] = x[i] * (0.5 * i) + (i - 0.5)
        return y

    n = np.arange(4)
    np.testing.assert_allclose(ramp(np.ones(4, np.float32)), 0.5 * n + n - 0.5)

    @sparsecomp.kernel
    def compare(x: Tensor[f32, "N"]) -> Tensor[f32, "N"]:
        y[i] = x[i] if i > 1.5 else 0.0
        return y

    with pytest.raises(ScriptError, match=r"1\.5 is not a value of type index") as info:
        compare(np.ones(4, np.float32))
    assert "f32(i)" in str(info.value)


@sparsecomp.kernel
def threshold(A: Tensor[f64, ("M", "N"), "csr"], t: f64) -> Tensor[f64, ("M", "N"), "csr"]:
    E[i, j] = where(A[i, j] > t, A[i, j], 0.0)
    return E


def test_thresholding_visits_only_stored_entries(private_cache: None) -> None:
    """``where(A > t, A, 0.0)`` vanishes where ``A`` is zero, whatever ``t``: the
    canonicalizer had moved the 0.0 out of the body, which then read as an arbitrary
    value, and the kernel ran over the dense M x N space (a 10^5 x 8*10^4 matrix
    asked for 60 GB)."""
    exe = threshold.compile()
    assert not exe.remarks, exe.remarks  # no "computed dense" fallback
    g = np.random.default_rng(5)
    a = sp.random(300, 200, density=0.05, format="csr", random_state=g)
    want = a.copy()
    want.data[want.data <= 0.5] = 0
    want.eliminate_zeros()
    got = threshold(a, 0.5).to_scipy()
    np.testing.assert_array_equal(got.toarray(), want.toarray())


@sparsecomp.kernel
def spmv_f16(A: Tensor[f16, ("M", "N"), "csr"], x: Tensor[f16, "N"]) -> Tensor[f16, "M"]:
    y[i] += A[i, j] * x[j]
    return y


def test_an_f16_kernels_hint_for_scipy_input_is_safe_to_follow(private_cache: None) -> None:
    """The hint said .astype(np.float16), which scipy refuses, and (for MLIR kernels)
    with_values(A.data.astype(...)), which puts an unsorted row's values on the wrong
    columns; SparseTensor.astype converts the tensor's own values."""
    a = sp.csr_array((np.array([1.0, 2.0, 3.0], np.float32), np.array([2, 0, 1]),
                      np.array([0, 2, 3])), shape=(2, 3))  # fmt: skip
    assert not a.has_sorted_indices
    x = np.array([1, 10, 100], np.float16)
    with pytest.raises(ScriptError, match="is f16, got f32") as info:
        spmv_f16(a, x)
    assert "SparseTensor.from_scipy(A, ...).astype(np.float16)" in str(info.value.hint)
    got = spmv_f16(SparseTensor.from_scipy(a, "csr").astype(np.float16), x)
    np.testing.assert_allclose(got, a.toarray() @ x.astype(np.float32), rtol=1e-3)


@sparsecomp.kernel
def reciprocal(X: Tensor[i32, ("M", "N"), "csr"]) -> Tensor[i32, ("M", "N")]:
    B[i, j] = where(X[i, j] != 0, 100 / X[i, j], -1)
    return B


@sparsecomp.kernel
def by_row_max(A: Tensor[i32, ("M", "N"), "csr"]) -> Tensor[i32, ("M", "N")]:
    m[i] = max(m[i], A[i, j])
    B[i, j] = A[i, j] / m[i]
    return B


def test_integer_division_by_zero_in_the_sparsifiers_kernels_gives_zero(
    private_cache: None,
) -> None:
    """Bodies that do not vanish at zero go to MLIR's sparsifier, whose code had no
    safe division: 100 / X over CSR and A / rowmax(A) died of SIGFPE."""
    d = np.array([[5, 0], [0, -3]], np.int32)
    for stored in (sp.csr_matrix(d), sp.csr_matrix((np.array([5, 0, 0, -3], np.int32),
                   np.array([0, 1, 0, 1]), np.array([0, 2, 4])), shape=(2, 2))):  # fmt: skip
        np.testing.assert_array_equal(reciprocal(stored), [[20, -1], [-1, -33]])
    a = np.array([[4, 2, 0], [-7, -2, 0]], np.int32)
    want = np.array([[1, 0, 0], [0, 0, 0]], np.int32)  # row 1's max is 0: x / 0 = 0
    np.testing.assert_array_equal(by_row_max(sp.csr_matrix(a)), want)


@sparsecomp.kernel
def clamp_i8(x: Tensor[i8, "N"]) -> Tensor[i8, "N"]:
    y[i] = where(x[i] < 0, -128, x[i])
    return y


def test_the_most_negative_literal_of_a_type(private_cache: None) -> None:
    """-128 was read as -(128), and 128 is no i8: refused."""
    x = np.array([-3, 5], np.int8)
    np.testing.assert_array_equal(clamp_i8(x), np.array([-128, 5], np.int8))


def test_kernel_syntax_is_importable_and_says_what_it_is() -> None:
    """where/exp/... were names only a kernel body knew: a program importing them (to
    quiet linters) got an ImportError."""
    from sparsecomp.script import exp, where

    with pytest.raises(SparsecompError, match=r"where\(\) is kernel syntax"):
        where(True, 1.0, 2.0)
    assert exp.__name__ == "exp"


@sparsecomp.kernel
def scale_by(x: Tensor[f32, "N"], alpha: "T") -> Tensor[f32, "N"]:
    y[i] = x[i] * f32(alpha)
    return y


def test_a_numpy_scalar_binds_the_type_variable_it_is_given_for(private_cache: None) -> None:
    """The hint for a Python number said to pass a numpy scalar, which was refused the
    same way (numpy scalars were numbers, binding nothing)."""
    x = np.ones(3, np.float32)
    for alpha in (np.float32(2.0), np.float64(2.0), np.int8(2), np.array(2.0, np.float32)):
        np.testing.assert_array_equal(scale_by(x, alpha), 2 * x)
    with pytest.raises(ScriptError, match="nothing else binds type variable 'T'"):
        scale_by(x, 2.0)
