"""Elementwise consumers applied as a sparse nest writes its output (``lowering/epilogue``).

Each program is a sparse product followed by an activation (a separate
``linalg.generic``). Compiled, the activation runs on the accumulators
before they are stored (checked in the stage-II IR: no loop of its own is
left), in every path that writes each output element once (scalar rows,
vector row chunks, jammed BSR block rows, grouped CSR rows, transposed
stores); where the nest writes partial sums (CSC) it stays a loop of its
own. Results are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erf

import sparsecomp
from sparsecomp.formats import SparseTensor
from sparsecomp.formats.names import parse_layout

ACTIVATIONS = {
    "relu": (
        "%y = arith.maximumf %a, %zero : f32",
        lambda z, alpha: np.maximum(z, 0),
    ),
    "gelu": (
        """%s = arith.mulf %a, %rsqrt2 : f32
      %erf = math.erf %s : f32
      %p = arith.addf %one, %erf : f32
      %h = arith.mulf %a, %half : f32
      %y = arith.mulf %h, %p : f32""",
        lambda z, alpha: 0.5 * z * (1 + erf(z / np.sqrt(2))),
    ),
    "scaled": (  # reads a function argument
        """%s = arith.mulf %a, %alpha : f32
      %y = arith.minimumf %s, %one : f32""",
        lambda z, alpha: np.minimum(z * alpha, 1),
    ),
}

CONSTANTS = """%zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %rsqrt2 = arith.constant 0.70710678118654752440 : f32"""

#: the activation, a linalg.generic of its own after the product ``%r`` (``rows x cols``)
CONSUMER = """  %e2 = tensor.empty({rows}, {cols}) : tensor<?x?xf32>
  %g = linalg.generic {{{{
      indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
      iterator_types = ["parallel", "parallel"]}}}}
      ins(%r : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {{{{
    ^bb0(%a: f32, %o: f32):
      {{body}}
      linalg.yield %y : f32
  }}}} -> tensor<?x?xf32>
  return %g : tensor<?x?xf32>
}}}}
"""

#: C = act(A B), A sparse m x k, B dense k x n (row chunks of C vectorized)
SPMM = """
#A = {layout}
func.func @f(%A: tensor<?x?xf32, #A>, %B: tensor<?x?xf32>, %alpha: f32) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  {constants}
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #A>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #A>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
""" + CONSUMER.format(rows="%m", cols="%n")

#: Y = act(X A^T), X n x k row-major, Y n x m row-major (stored transposed)
LINEAR = """
#A = {layout}
func.func @f(%A: tensor<?x?xf32, #A>, %X: tensor<?x?xf32>, %alpha: f32) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  {constants}
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #A>
  %n = tensor.dim %X, %c0 : tensor<?x?xf32>
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %Y = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.generic {{
      indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>,
                       affine_map<(i, j, k) -> (j, i)>],
      iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%A, %X : tensor<?x?xf32, #A>, tensor<?x?xf32>) outs(%Y : tensor<?x?xf32>) {{
    ^bb0(%av: f32, %xv: f32, %acc: f32):
      %pr = arith.mulf %av, %xv : f32
      %su = arith.addf %acc, %pr : f32
      linalg.yield %su : f32
  }} -> tensor<?x?xf32>
""" + CONSUMER.format(rows="%n", cols="%m")

_compiled: dict[tuple[str, str, str], object] = {}


def _program(kind: str, layout: str, act: str):
    key = (kind, layout, act)
    if key not in _compiled:
        template = SPMM if kind == "spmm" else LINEAR
        text = template.format(
            layout=parse_layout(layout).attr_text(), constants=CONSTANTS, body=ACTIVATIONS[act][0]
        )
        # panels on: the transposed (linear) nests run their jammed / grouped paths
        _compiled[key] = sparsecomp.compile(text, "host", panel_bytes=1 << 16)
    return _compiled[key]


def _fused(exe) -> bool:
    """Whether the stage-II IR has no loop of the activation's own left."""
    loops = (exe.directory / "loops.mlir").read_text()
    return "linalg.generic" not in loops and "linalg.map" not in loops


@settings(max_examples=12, deadline=None)
@given(
    kind=st.sampled_from(["spmm", "linear"]),
    layout=st.sampled_from(["csr", "bsr:2x2", "bsr:8x1", "csc", "hyb", "bsr+csr:4x4"]),
    act=st.sampled_from(sorted(ACTIVATIONS)),
    m=st.integers(1, 40),
    k=st.integers(1, 30),
    n=st.integers(1, 70),
    density=st.floats(0.05, 0.6),
    seed=st.integers(0, 2**31 - 1),
)
def test_activation_after_a_product_equals_numpy(kind, layout, act, m, k, n, density, seed):
    rng = np.random.default_rng(seed)
    a = sp.random(m, k, density=density, format="csr", dtype=np.float32, random_state=rng)
    alpha = np.float32(rng.uniform(-2, 2))
    exe = _program(kind, layout, act)
    if kind == "spmm":
        b = rng.standard_normal((k, n)).astype(np.float32)
        z = a.toarray().astype(np.float64) @ b
    else:
        b = rng.standard_normal((n, k)).astype(np.float32)
        z = b.astype(np.float64) @ a.toarray().T
    got = exe.f(SparseTensor.from_scipy(a, layout), b, alpha)
    want = ACTIVATIONS[act][1](z, alpha)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("kind", ["spmm", "linear"])
@pytest.mark.parametrize("layout", ["hyb", "bsr+csr:4x4"])
def test_activation_reading_constants_after_a_composable_product(kind, layout) -> None:
    """A ReLU (``maximumf`` with a constant defined outside its body) after a product
    over a composable operand: each part's nest applies it (an internal error in
    sparse-iter-lower-iterations: the parts' ops came as views without a block)."""
    rng = np.random.default_rng(1)
    a = sp.random(37, 29, density=0.2, format="csr", dtype=np.float32, random_state=rng)
    b = rng.standard_normal((29, 11) if kind == "spmm" else (11, 29)).astype(np.float32)
    z = a.toarray() @ b if kind == "spmm" else b @ a.toarray().T
    got = _program(kind, layout, "relu").f(SparseTensor.from_scipy(a, layout), b, np.float32(1))
    np.testing.assert_allclose(got, np.maximum(z, 0), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    ("kind", "layout", "fused"),
    [
        ("spmm", "csr", True),  # vector row chunks
        ("spmm", "bsr:2x2", True),  # jammed block rows
        ("linear", "bsr:8x1", True),  # jammed, stored transposed
        ("linear", "csr", True),  # grouped rows, stored transposed
        ("spmm", "csc", False),  # partial sums per column: a loop of its own
    ],
)
def test_where_the_activation_is_fused(kind, layout, fused):
    assert _fused(_program(kind, layout, "gelu")) == fused


def test_activation_after_a_sliced_reduction() -> None:
    """With the gathered rows cut in slices (a small ``slice_bytes``, long rows of
    ``A`` and of ``B``), every slice writes partial sums; only the last applies
    the activation."""
    text = SPMM.format(
        layout=parse_layout("csr").attr_text(), constants=CONSTANTS, body=ACTIVATIONS["gelu"][0]
    )
    exe = sparsecomp.compile(text, "host", slice_bytes=4096)
    assert _fused(exe)
    rng = np.random.default_rng(3)
    a = sp.random(40, 3000, density=0.3, format="csr", dtype=np.float32, random_state=rng)
    b = rng.standard_normal((3000, 96)).astype(np.float32)  # rows of 384 bytes
    z = a.toarray().astype(np.float64) @ b
    got = exe.f(SparseTensor.from_scipy(a, "csr"), b, np.float32(1))
    np.testing.assert_allclose(got, ACTIVATIONS["gelu"][1](z, 1), rtol=2e-5, atol=2e-5)
