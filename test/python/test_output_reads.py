"""Bodies that read the output (``%o``), against numpy.

linalg's output operand is the initial value of the result: ``C .* A``
written ``o * a`` is ``C * A`` where ``A`` is stored and 0 where it is not
(the body yields zero there). The lowerings fill such outputs with zeros
but must read ``o`` from before the fill: the loop nest over one driver
(every layout), the row-wise merge of differently structured operands, and
the vectorized nest (a free parallel dimension).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsecomp.formats import SparseTensor
from sparsecomp.formats.names import parse_layout

pytestmark = pytest.mark.usefixtures("private_cache")

ID2 = "affine_map<(i, j) -> (i, j)>"

#: body (uses %a, %o; yields %r) -> numpy (a, o) where the body is evaluated.
BODIES = {
    "o*a": ("%r = arith.mulf %o, %a : f32", lambda a, o: o * a),
    "a/o": ("%r = arith.divf %a, %o : f32", lambda a, o: a / o),
    "max(o*a,a)": (
        "%p = arith.mulf %o, %a : f32\n    %r = arith.maximumf %p, %a : f32",
        lambda a, o: np.maximum(o * a, a),
    ),
    "select(a>0,o*a,-a)": (
        "%z = arith.constant 0.0 : f32\n    %c = arith.cmpf ogt, %a, %z : f32\n"
        "    %p = arith.mulf %o, %a : f32\n    %n = arith.negf %a : f32\n"
        "    %r = arith.select %c, %p, %n : f32",
        lambda a, o: np.where(a > 0, o * a, -a),
    ),
    "o*a+a": (
        "%p = arith.mulf %o, %a : f32\n    %r = arith.addf %p, %a : f32",
        lambda a, o: o * a + a,
    ),
    "o-o*a": (  # keeps o where a is zero (annihilating), for contrast
        "%p = arith.mulf %o, %a : f32\n    %r = arith.subf %o, %p : f32",
        lambda a, o: o - o * a,
    ),
}
LAYOUTS = ["csr", "csc", "coo", "dcsr", "ell", "bsr:2x2", "nm:2:4", "dense"]


@functools.cache
def elementwise(layout: str, body: str):  # -> sparsecomp.Executable
    import sparsecomp

    text = f"""
#A = {parse_layout(layout, 2).attr_text()}
func.func @k(%A: tensor<?x?xf32, #A>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %res = linalg.generic {{indexing_maps = [{ID2}, {ID2}],
                          iterator_types = ["parallel", "parallel"]}}
      ins(%A : tensor<?x?xf32, #A>) outs(%C : tensor<?x?xf32>) {{
  ^bb0(%a: f32, %o: f32):
    {BODIES[body][0]}
    linalg.yield %r : f32
  }} -> tensor<?x?xf32>
  return %res : tensor<?x?xf32>
}}
"""
    return sparsecomp.compile(text)


def sparse_matrix(layout: str, shape: tuple[int, int], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, shape).astype(np.float32) * (rng.random(shape) < 0.4)
    if layout.startswith("nm:"):  # at most 2 of every 4 columns
        for j0 in range(0, shape[1], 4):
            group = a[:, j0 : j0 + 4]
            group *= np.cumsum(group != 0, axis=1) <= 2
    return a


def want(body: str, a: np.ndarray, c: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """Where the body is evaluated (stored entries), its value; elsewhere its value at a=0."""
    f = BODIES[body][1]
    at_zero = f(np.zeros_like(a), c)
    return np.where(stored, f(a, c), at_zero)


def stored_mask(layout: str, a: np.ndarray) -> np.ndarray:
    """Every layout here evaluates the body at least where ``a`` is nonzero; the bodies
    give the same value at a stored zero as at an unstored one."""
    return a != 0


@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=8, deadline=None)
@given(m=st.integers(0, 7), n=st.integers(0, 9), seed=st.integers(0, 2**16))
def test_body_reads_output(layout: str, body: str, m: int, n: int, seed: int) -> None:
    exe = elementwise(layout, body)
    a = sparse_matrix(layout, (m, n), seed)
    c = np.random.default_rng(seed + 1).integers(1, 4, (m, n)).astype(np.float32)
    got = exe(SparseTensor.from_dense(a, layout), c)
    np.testing.assert_allclose(got, want(body, a, c, stored_mask(layout, a)), rtol=1e-6)


def test_repro_c_times_a() -> None:
    """C .* A with dense C: zero where A has no entry, C*A where it has."""
    import scipy.sparse as sp

    exe = elementwise("csr", "o*a")
    a = np.array([[2.0, 0.0], [0.0, 3.0]], np.float32)
    got = exe(sp.csr_matrix(a), np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(got, [[2.0, 0.0], [0.0, 3.0]])


# -- row by row: two differently structured CSR operands -----------------------------------

ROWWISE = {
    "o*a*b": ("%p = arith.mulf %a, %b : f32\n    %r = arith.mulf %o, %p : f32", "and"),
    "o*(a+b)": ("%p = arith.addf %a, %b : f32\n    %r = arith.mulf %o, %p : f32", "or"),
}


@functools.cache
def rowwise(body: str):  # -> sparsecomp.Executable
    import sparsecomp

    csr = parse_layout("csr", 2).attr_text()
    text = f"""
#A = {csr}
func.func @k(%A: tensor<?x?xf32, #A>, %B: tensor<?x?xf32, #A>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %res = linalg.generic {{indexing_maps = [{ID2}, {ID2}, {ID2}],
                          iterator_types = ["parallel", "parallel"]}}
      ins(%A, %B : tensor<?x?xf32, #A>, tensor<?x?xf32, #A>) outs(%C : tensor<?x?xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    {ROWWISE[body][0]}
    linalg.yield %r : f32
  }} -> tensor<?x?xf32>
  return %res : tensor<?x?xf32>
}}
"""
    return sparsecomp.compile(text)


@pytest.mark.parametrize("body", list(ROWWISE))
@settings(max_examples=10, deadline=None)
@given(m=st.integers(0, 7), n=st.integers(0, 9), seed=st.integers(0, 2**16))
def test_rowwise_body_reads_output(body: str, m: int, n: int, seed: int) -> None:
    exe = rowwise(body)
    a, b = sparse_matrix("csr", (m, n), seed), sparse_matrix("csr", (m, n), seed + 1)
    c = np.random.default_rng(seed + 2).integers(1, 4, (m, n)).astype(np.float32)
    got = exe(SparseTensor.from_dense(a, "csr"), SparseTensor.from_dense(b, "csr"), c)
    if ROWWISE[body][1] == "and":
        expect = np.where((a != 0) & (b != 0), c * a * b, 0)
    else:
        expect = np.where((a != 0) | (b != 0), c * (a + b), 0)
    np.testing.assert_allclose(got, expect)


# -- vectorized: a free parallel dimension --------------------------------------------------


@functools.cache
def broadcast():  # -> sparsecomp.Executable
    import sparsecomp

    csr = parse_layout("csr", 2).attr_text()
    m3 = "affine_map<(i, j, l) -> (i, j, l)>"
    text = f"""
#A = {csr}
func.func @k(%A: tensor<?x?xf32, #A>, %C: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {{
  %res = linalg.generic {{indexing_maps = [affine_map<(i, j, l) -> (i, j)>, {m3}],
                          iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%A : tensor<?x?xf32, #A>) outs(%C : tensor<?x?x?xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %o, %a : f32
    linalg.yield %r : f32
  }} -> tensor<?x?x?xf32>
  return %res : tensor<?x?x?xf32>
}}
"""
    return sparsecomp.compile(text)


@settings(max_examples=10, deadline=None)
@given(m=st.integers(0, 6), n=st.integers(0, 6), k=st.integers(1, 37), seed=st.integers(0, 2**16))
def test_vectorized_body_reads_output(m: int, n: int, k: int, seed: int) -> None:
    a = sparse_matrix("csr", (m, n), seed)
    c = np.random.default_rng(seed + 1).integers(1, 4, (m, n, k)).astype(np.float32)
    got = broadcast()(SparseTensor.from_dense(a, "csr"), c)
    np.testing.assert_allclose(got, c * a[:, :, None])
