"""Blocked layouts whose shape is not a multiple of the block, against numpy.

sparse_iter's own lowering bounds a partial last block (BSR) or group (n:m)
by the dimension size; every op kind is checked over random shapes, 0- and
1-sized ones included, in every blocked layout (and ELL, CSR for
reference). The upstream sparsifier stores blocks whole: functions it
compiles hold blocked values of dynamic or partial shapes unblocked (CSR),
take such arguments converted and return such results converted back to
their declared layout.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsecomp.errors import SparsecompError
from sparsecomp.formats import SparseTensor
from sparsecomp.formats.names import parse_layout

pytestmark = pytest.mark.usefixtures("private_cache")

LAYOUTS = ["bsr:2x2", "bsr:2x3", "nm:2:4", "ell", "csr"]
MAP2 = "affine_map<(i, j) -> (i, j)>"
MAP3 = "affine_map<(i, j, k) -> ({})>"


def _attr(layout: str) -> str:
    return parse_layout(layout, 2).attr_text()


def _generic(maps: list[str], iters: list[str], ins: str, outs: str, body: str) -> str:
    its = ", ".join(f'"{t}"' for t in iters)
    return (
        f"%r = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}}\n"
        f"      ins({ins}) outs({outs}) {{\n{textwrap.indent(body, '    ')}\n    }}"
    )


def _kernel(op: str) -> tuple[str, str]:
    """``(signature after %A, body)`` of each op kind; ``#A`` is the sparse layout."""
    a = "%A : tensor<?x?xf32, #A>"
    if op == "spmv":
        g = _generic(
            [MAP2, "affine_map<(i, j) -> (j)>", "affine_map<(i, j) -> (i)>"],
            ["parallel", "reduction"],
            "%A, %x : tensor<?x?xf32, #A>, tensor<?xf32>",
            "%y : tensor<?xf32>",
            "^bb0(%a: f32, %b: f32, %o: f32):\n  %m = arith.mulf %a, %b : f32\n"
            "  %s = arith.addf %o, %m : f32\n  linalg.yield %s : f32",
        )
        return "%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32>", g + " -> tensor<?xf32>"
    if op == "spmm":
        g = _generic(
            [MAP3.format("i, k"), MAP3.format("k, j"), MAP3.format("i, j")],
            ["parallel", "parallel", "reduction"],
            "%A, %B : tensor<?x?xf32, #A>, tensor<?x?xf32>",
            "%C : tensor<?x?xf32>",
            "^bb0(%a: f32, %b: f32, %o: f32):\n  %m = arith.mulf %a, %b : f32\n"
            "  %s = arith.addf %o, %m : f32\n  linalg.yield %s : f32",
        )
        sig = "%B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32>"
        return sig, g + " -> tensor<?x?xf32>"
    if op in ("times_dense", "out_times_a", "out_max_a"):
        body = {
            "times_dense": "%r = arith.mulf %a, %d : f32",
            "out_times_a": "%r = arith.mulf %o, %a : f32",
            "out_max_a": "%p = arith.mulf %o, %a : f32\n  %r = arith.maximumf %p, %a : f32",
        }[op]
        g = _generic(
            [MAP2, MAP2, MAP2],
            ["parallel", "parallel"],
            "%A, %D : tensor<?x?xf32, #A>, tensor<?x?xf32>",
            "%C : tensor<?x?xf32>",
            f"^bb0(%a: f32, %d: f32, %o: f32):\n  {body}\n  linalg.yield %r : f32",
        )
        sig = "%D: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32>"
        return sig, g + " -> tensor<?x?xf32>"
    if op in ("row_sum", "col_sum"):
        out = "affine_map<(i, j) -> (i)>" if op == "row_sum" else "affine_map<(i, j) -> (j)>"
        iters = ["parallel", "reduction"] if op == "row_sum" else ["reduction", "parallel"]
        g = _generic(
            [MAP2, out],
            iters,
            a,
            "%y : tensor<?xf32>",
            "^bb0(%a: f32, %o: f32):\n  %s = arith.addf %o, %a : f32\n  linalg.yield %s : f32",
        )
        return "%y: tensor<?xf32>) -> tensor<?xf32>", g + " -> tensor<?xf32>"
    if op == "scale_sparse_out":
        g = _generic(
            [MAP2, MAP2],
            ["parallel", "parallel"],
            a,
            "%e : tensor<?x?xf32, #A>",
            "^bb0(%a: f32, %o: f32):\n  %c = arith.constant 3.0 : f32\n"
            "  %r = arith.mulf %a, %c : f32\n  linalg.yield %r : f32",
        )
        return ") -> tensor<?x?xf32, #A>", _empty_like_a() + g + " -> tensor<?x?xf32, #A>"
    assert op == "sddmm"
    g = _generic(
        [MAP3.format("i, j"), MAP3.format("i, k"), MAP3.format("j, k"), MAP3.format("i, j")],
        ["parallel", "parallel", "reduction"],
        "%A, %X, %Y : tensor<?x?xf32, #A>, tensor<?x?xf32>, tensor<?x?xf32>",
        "%e : tensor<?x?xf32, #A>",
        "^bb0(%s: f32, %x: f32, %y: f32, %o: f32):\n  %xy = arith.mulf %x, %y : f32\n"
        "  %sxy = arith.mulf %s, %xy : f32\n  %r = arith.addf %o, %sxy : f32\n"
        "  linalg.yield %r : f32",
    )
    sig = "%X: tensor<?x?xf32>, %Y: tensor<?x?xf32>) -> tensor<?x?xf32, #A>"
    return sig, _empty_like_a() + g + " -> tensor<?x?xf32, #A>"


def _empty_like_a() -> str:
    return (
        "%c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
        "  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #A>\n"
        "  %n = tensor.dim %A, %c1 : tensor<?x?xf32, #A>\n"
        "  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #A>\n  "
    )


def source(layout: str, op: str) -> str:
    sig, body = _kernel(op)
    result = sig.rsplit("-> ", 1)[1]
    return (
        f"#A = {_attr(layout)}\n"
        f"func.func @k(%A: tensor<?x?xf32, #A>, {sig} {{\n"
        f"  {body}\n  return %r : {result}\n}}\n"
    ).replace("(%A: tensor<?x?xf32, #A>, )", "(%A: tensor<?x?xf32, #A>)")


@functools.cache
def compiled(layout: str, op: str):  # -> sparsecomp.Executable
    import sparsecomp

    return sparsecomp.compile(source(layout, op))


def matrix(layout: str, shape: tuple[int, int], density: float, seed: int) -> np.ndarray:
    """A random matrix storable in ``layout`` (at most n of every m columns for n:m)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, shape).astype(np.float32) * (rng.random(shape) < density)
    if layout.startswith("nm:"):
        _, n, m = layout.split(":")
        for j0 in range(0, shape[1], int(m)):
            group = a[:, j0 : j0 + int(m)]
            keep = np.cumsum(group != 0, axis=1) <= int(n)
            group *= keep
    return a


def dense(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)


def expected(op: str, a: np.ndarray, args: list[np.ndarray]) -> np.ndarray:
    if op == "spmv":
        return args[1] + a @ args[0]
    if op == "spmm":
        return args[1] + a @ args[0]
    if op == "times_dense":
        return a * args[0]
    if op == "out_times_a":
        return args[1] * a
    if op == "out_max_a":
        return np.where(a != 0, np.maximum(args[1] * a, a), 0)
    if op == "row_sum":
        return args[0] + a.sum(axis=1)
    if op == "col_sum":
        return args[0] + a.sum(axis=0)
    if op == "scale_sparse_out":
        return 3 * a
    assert op == "sddmm"
    return a * (args[0] @ args[1].T)


def operands(op: str, shape: tuple[int, int], k: int, seed: int) -> list[np.ndarray]:
    m, n = shape
    return {
        "spmv": lambda: [dense((n,), seed), dense((m,), seed + 1)],
        "spmm": lambda: [dense((n, k), seed), dense((m, k), seed + 1)],
        "times_dense": lambda: [dense(shape, seed), dense(shape, seed + 1)],
        "out_times_a": lambda: [dense(shape, seed), dense(shape, seed + 1)],
        "out_max_a": lambda: [dense(shape, seed), dense(shape, seed + 1)],
        "row_sum": lambda: [dense((m,), seed)],
        "col_sum": lambda: [dense((n,), seed)],
        "scale_sparse_out": lambda: [],
        "sddmm": lambda: [dense((m, k), seed), dense((n, k), seed + 1)],
    }[op]()


OPS = [
    "spmv", "spmm", "times_dense", "out_times_a", "out_max_a", "row_sum", "col_sum",
    "scale_sparse_out", "sddmm",
]  # fmt: skip


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lowered_by_sparse_iter(layout: str, op: str) -> None:
    """Every (layout, op) pair here compiles natively: it takes A in its own layout."""
    sig = compiled(layout, op).functions["k"].signature
    assert sig.args[0].layout == parse_layout(layout, 2), sig


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(0, 9),
    n=st.integers(0, 11),
    k=st.integers(1, 5),
    density=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_partial_blocks_match_numpy(
    layout: str, op: str, m: int, n: int, k: int, density: float, seed: int
) -> None:
    exe = compiled(layout, op)
    a = matrix(layout, (m, n), density, seed)
    args = operands(op, (m, n), k, seed + 7)
    got = exe(SparseTensor.from_dense(a, layout), *args)
    if isinstance(got, SparseTensor):
        assert got.shape == (m, n)
        got = got.to_dense()
    np.testing.assert_allclose(got, expected(op, a, args), rtol=1e-5, atol=1e-5)


# -- the upstream fallback: partial blocks held unblocked ------------------------------

BSR2 = _attr("bsr:2x2")
CSR = _attr("csr")
NM = _attr("nm:2:4")

#: CSR .* BSR co-iterates two structures: sparse_iter hands it to the sparsifier.
CSR_TIMES_BSR = f"""
#csr = {CSR}
#bsr = {BSR2}
func.func @k(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #bsr>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.generic {{indexing_maps = [{MAP2}, {MAP2}, {MAP2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #bsr>) outs(%C : tensor<?x?xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.mulf %a, %b : f32
      linalg.yield %s : f32
    }} -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


def _from_dims(a: str, op: str) -> str:
    """``A op B`` into a tensor.empty sized by ``tensor.dim`` of ``A`` (layout ``a``), B a BSR."""
    return f"""
#a = {a}
#bsr = {BSR2}
func.func @k(%A: tensor<?x?xf32, #a>, %B: tensor<?x?xf32, #bsr>) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #a>
  %n = tensor.dim %A, %c1 : tensor<?x?xf32, #a>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %r = linalg.generic {{indexing_maps = [{MAP2}, {MAP2}, {MAP2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%A, %B : tensor<?x?xf32, #a>, tensor<?x?xf32, #bsr>) outs(%e : tensor<?x?xf32>) {{
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.{op} %x, %y : f32
      linalg.yield %s : f32
    }} -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


#: A BSR result built from a CSR argument's dims: the CSR argument's dims must be whole blocks.
BSR_FROM_CSR_DIMS = _from_dims(CSR, "addf")


@settings(max_examples=15, deadline=None)
@given(m=st.integers(0, 7), n=st.integers(0, 7), seed=st.integers(0, 2**16))
def test_fallback_partial_blocks_match_numpy(m: int, n: int, seed: int) -> None:
    """CSR .* BSR: the BSR operand is taken as CSR, every shape gives numpy's answer."""
    import sparsecomp

    exe = sparsecomp.compile(CSR_TIMES_BSR)
    assert exe.functions["k"].signature.args[1].layout == parse_layout("csr", 2)
    a, b = matrix("csr", (m, n), 0.5, seed), matrix("csr", (m, n), 0.5, seed + 1)
    args = (SparseTensor.from_dense(a, "csr"), SparseTensor.from_dense(b, "bsr:2x2"))
    np.testing.assert_array_equal(exe(*args, np.zeros((m, n), np.float32)), a * b)


def test_fallback_sizes_from_arguments() -> None:
    import sparsecomp

    exe = sparsecomp.compile(BSR_FROM_CSR_DIMS)
    a, b = np.ones((3, 5), np.float32), np.arange(15, dtype=np.float32).reshape(3, 5)
    got = exe(SparseTensor.from_dense(a, "csr"), SparseTensor.from_dense(b, "bsr:2x2"))
    np.testing.assert_array_equal(got, a + b)


BSR_DIMS = _from_dims(BSR2, "mulf")


def test_fallback_dims_of_a_partial_block_operand() -> None:
    """``tensor.dim`` of a 3x3 BSR 2x2 operand is 3 (upstream's blocked form said 4)."""
    import scipy.sparse as sp

    import sparsecomp

    exe = sparsecomp.compile(BSR_DIMS)
    a = sp.csr_matrix(np.arange(1, 10, dtype=np.float32).reshape(3, 3))
    got = exe(a, SparseTensor.from_scipy(a, "bsr:2x2"))
    assert got.shape == (3, 3)
    np.testing.assert_array_equal(got, a.multiply(a).toarray())


@pytest.mark.parametrize(
    ("layout", "shape"),
    [("bsr:2x2", (3, 4)), ("bsr:2x2", (4, 5)), ("nm:2:4", (4, 6)), ("bsr:2x2", (4, 6))],
)
def test_fallback_static_shapes(layout: str, shape: tuple[int, int]) -> None:
    """Static partial shapes are held unblocked, whole ones keep their blocks."""
    import sparsecomp

    text = CSR_TIMES_BSR.replace("?x?", "x".join(map(str, shape))).replace(BSR2, _attr(layout))
    exe = sparsecomp.compile(text)
    whole = all(s % 2 == 0 for s in shape) and layout.startswith("bsr")
    held = exe.functions["k"].signature.args[1].layout
    assert held == parse_layout(layout if whole else "csr", 2), held
    a, b = matrix("csr", shape, 0.6, 3), matrix(layout, shape, 0.6, 4)
    args = (SparseTensor.from_dense(a, "csr"), SparseTensor.from_dense(b, layout))
    np.testing.assert_array_equal(exe(*args, np.zeros(shape, np.float32)), a * b)


BUILD_NM = f"""
#csr = {CSR}
#nm = {NM}
func.func @k(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #nm> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %A, %c1 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #nm>
  %r = linalg.generic {{indexing_maps = [{MAP2}, {MAP2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%A : tensor<?x?xf32, #csr>) outs(%e : tensor<?x?xf32, #nm>) {{
    ^bb0(%a: f32, %o: f32):
      %s = arith.negf %a : f32
      linalg.yield %s : f32
    }} -> tensor<?x?xf32, #nm>
  return %r : tensor<?x?xf32, #nm>
}}
"""


@settings(max_examples=10, deadline=None)
@given(m=st.integers(0, 5), n=st.integers(0, 9), seed=st.integers(0, 2**16))
def test_fallback_builds_nm_values(m: int, n: int, seed: int) -> None:
    """An n:m result computed upstream comes back in its declared n:m layout."""
    import sparsecomp

    exe = sparsecomp.compile(BUILD_NM)
    a = matrix("nm:2:4", (m, n), 0.7, seed)
    got = exe(SparseTensor.from_dense(a, "csr"))
    assert got.layout == parse_layout("nm:2:4", 2)
    np.testing.assert_array_equal(got.to_dense(), -a)


def test_fallback_nm_result_that_is_not_nm() -> None:
    import sparsecomp

    exe = sparsecomp.compile(BUILD_NM)
    a = SparseTensor.from_dense(np.ones((1, 4), np.float32), "csr")
    with pytest.raises(SparsecompError, match="does not fit its declared layout: not 2:4"):
        exe(a)


_SEGV_CASE = f"""
import numpy as np, sparsecomp
from sparsecomp.formats import SparseTensor
src = '''
#bsr = {_attr("bsr:4x4")}
#nm = {NM}
func.func @k(%A: tensor<?x?xf32, #bsr>, %B: tensor<?x?xf32, #nm>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.generic {{indexing_maps = [{MAP2}, affine_map<(i, j) -> (j, i)>, {MAP2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%A, %B : tensor<?x?xf32, #bsr>, tensor<?x?xf32, #nm>) outs(%C : tensor<?x?xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %t = arith.mulf %a, %b : f32
      %s = arith.addf %o, %t : f32
      linalg.yield %s : f32
    }} -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
'''
exe = sparsecomp.compile(src)
for n in (1, 3, 4, 5):
    one, eye = np.ones((n, n), np.float32), np.eye(n, dtype=np.float32)
    a, b = SparseTensor.from_dense(one, "bsr:4x4"), SparseTensor.from_dense(eye, "nm:2:4")
    got = exe(a, b, one)
    assert (got == 1 + eye).all(), (n, got)
print("ok")
"""


def test_fallback_partial_blocks_never_crash(tmp_path) -> None:
    """BSR .* (n:m)^T in the fallback with 1x1..5x5 matrices (once a SIGSEGV)."""
    script = tmp_path / "case.py"
    script.write_text(_SEGV_CASE)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"


@pytest.mark.parametrize(
    ("nm_map", "shape"),
    [
        ("(i, j) -> (j : dense, i floordiv 4 : dense, i mod 4 : structured[2, 4])", (16, 7)),
        ("(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])", (7, 16)),
    ],
)
def test_fallback_nm_groups_along_either_dimension(nm_map: str, shape: tuple[int, int]) -> None:
    """Upstream read 2:4 groups along the rows wrongly: such operands are held unblocked."""
    import sparsecomp

    enc = f"#sparse_tensor.encoding<{{ map = {nm_map} }}>"
    t = f"tensor<{shape[0]}x{shape[1]}xf64, {enc}>"
    text = f"""
func.func @k(%b: {t}) -> tensor<{shape[0]}x{shape[1]}xf64> {{
  %d = sparse_tensor.convert %b : {t} to tensor<{shape[0]}x{shape[1]}xf64>
  return %d : tensor<{shape[0]}x{shape[1]}xf64>
}}"""
    fn = sparsecomp.compile(text).functions["k"]
    rows = shape[0] == 16  # groups of 4 along the rows: the transpose of an n:m matrix
    b = matrix("nm:2:4", shape[::-1], 0.8, 5).T if rows else matrix("nm:2:4", shape, 0.8, 5)
    b = np.ascontiguousarray(b, dtype=np.float64)
    got = fn(SparseTensor.from_dense(b, fn.signature.args[0].layout))
    np.testing.assert_array_equal(got, b)


_NM24 = "(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])"
_CO_ITERATED = {
    # a - b, a a transposed DCSR: upstream merged the 2:4 operand wrongly (garbage sums)
    "sub_dcsr_t": ("(i, j) -> (i : compressed, j : compressed)", "(i, j) -> (j, i)", "subf"),
    # a * b, a a column-major dense: upstream reordered the 2:4 operand wrongly (lost values)
    "mul_colmajor": ("(i, j) -> (j : dense, i : dense)", "(i, j) -> (i, j)", "mulf"),
}


@pytest.mark.parametrize("case", sorted(_CO_ITERATED))
@pytest.mark.parametrize("seed", [0, 1])
def test_fallback_nm_co_iterated(case: str, seed: int) -> None:
    """A static whole-group 2:4 operand beside another sparse one, in the fallback.

    (Fuzz cases 2:1866 and 2:2253 found these wrong.)
    """
    import sparsecomp

    a_map, a_read, op = _CO_ITERATED[case]
    m, n = 6, 8
    a_shape = (n, m) if a_read == "(i, j) -> (j, i)" else (m, n)
    ta = f"tensor<{a_shape[0]}x{a_shape[1]}xf64, #sparse_tensor.encoding<{{ map = {a_map} }}>>"
    tb = f"tensor<{m}x{n}xf64, #sparse_tensor.encoding<{{ map = {_NM24} }}>>"
    text = f"""
func.func @k(%a: {ta}, %b: {tb}, %o: tensor<{m}x{n}xf64>) -> tensor<{m}x{n}xf64> {{
  %r = linalg.generic {{indexing_maps = [affine_map<{a_read}>, {MAP2}, {MAP2}],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : {ta}, {tb}) outs(%o : tensor<{m}x{n}xf64>) {{
    ^bb0(%x: f64, %y: f64, %z: f64):
      %v = arith.{op} %x, %y : f64
      linalg.yield %v : f64
    }} -> tensor<{m}x{n}xf64>
  return %r : tensor<{m}x{n}xf64>
}}"""
    fn = sparsecomp.compile(text).functions["k"]
    a = matrix("csr", a_shape, 0.5, seed).astype(np.float64)
    b = matrix("nm:2:4", (m, n), 0.8, seed + 10).astype(np.float64)
    args = [SparseTensor.from_dense(x, spec.layout) for x, spec in zip((a, b), fn.signature.args)]
    got = fn(*args, np.zeros((m, n)))
    a_ij = a.T if a_shape == (n, m) else a
    np.testing.assert_array_equal(got, a_ij - b if op == "subf" else a_ij * b)


_EMPTY_BSR_CASE = """
import numpy as np, sparsecomp
from sparsecomp.formats import SparseTensor
BSR = ("(i, j) -> (i floordiv 4 : dense, j floordiv 2 : compressed, "
       "i mod 4 : dense, j mod 2 : dense)")
COO = "(i, j) -> (i : compressed(nonunique), j : singleton)"
for m, n in [(0, 8), (8, 0), (0, 0), (8, 4)]:
    a_t = f"tensor<{m}x{n}xi32, #sparse_tensor.encoding<{{ map = {BSR} }}>>"
    b_t = f"tensor<{m}x{n}xi32, #sparse_tensor.encoding<{{ map = {COO} }}>>"
    o_t = f"tensor<{m}x{n}xi32>"
    src = f'''
func.func @k(%a: {a_t}, %b: {b_t}, %o: {o_t}) -> {o_t} {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : {a_t}, {b_t}) outs(%o : {o_t}) {{
    ^bb0(%x: i32, %y: i32, %z: i32):
      %d = arith.subi %x, %y : i32
      linalg.yield %d : i32
    }} -> {o_t}
  return %r : {o_t}
}}'''
    fn = sparsecomp.compile(src, cache_results=False).functions["k"]
    a = np.arange(m * n, dtype=np.int32).reshape(m, n) % 3
    b = np.arange(m * n, dtype=np.int32).reshape(m, n) % 2
    args = [SparseTensor.from_dense(x, s.layout) for x, s in zip((a, b), fn.signature.args)]
    got = fn(*args, np.zeros((m, n), np.int32))
    assert got.shape == (m, n) and (got == a - b).all(), (m, n, got)
print("ok")
"""


def test_fallback_empty_blocked_dimensions_never_crash(tmp_path) -> None:
    """BSR - COO in the fallback with a 0-sized dimension (once a SIGSEGV: fuzz case 3:4822)."""
    script = tmp_path / "case.py"
    script.write_text(_EMPTY_BSR_CASE)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"
