"""Differential fuzzing of the Python front end: random kernels in the subset against numpy.

Hypothesis writes a kernel's source: an elementwise statement, a row
reduction, or a product with a dense ``D`` over ``j``, of an expression of a
sparse ``A``, a dense ``B``, vectors ``x`` and ``y``, numbers, ``+ - *``,
``max``/``min``, comparisons with ``where``, ``abs`` and ``exp``; and the same
expression as numpy code on the dense arrays. The kernel is compiled and run;
its result must equal numpy's. A kernel the compiler refuses (a
``SparsecompError`` saying why) is not counted, and too many refusals fail
the test; a wrong number, a crash or another exception fails it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from script_corpus import import_file
from sparsecomp.errors import SparsecompError

#: leaves: (kernel source, numpy source) over the element (i, j)
LEAVES = [
    ("A[i, j]", "A"),
    ("B[i, j]", "B"),
    ("x[j]", "x[None, :]"),
    ("y[i]", "y[:, None]"),
]


def leaf() -> st.SearchStrategy[tuple[str, str]]:
    number = st.sampled_from([0.5, 2.0, -1.5, 3.0]).map(lambda v: (repr(v), repr(v)))
    return st.one_of(st.sampled_from(LEAVES), number)


def extend(inner: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
    def binary(op: str) -> st.SearchStrategy[tuple[str, str]]:
        return st.tuples(inner, inner).map(
            lambda ab: (f"({ab[0][0]} {op} {ab[1][0]})", f"({ab[0][1]} {op} {ab[1][1]})")
        )

    def call(fn: str, np_fn: str) -> st.SearchStrategy[tuple[str, str]]:
        return st.tuples(inner, inner).map(
            lambda ab: (f"{fn}({ab[0][0]}, {ab[1][0]})", f"{np_fn}({ab[0][1]}, {ab[1][1]})")
        )

    select = st.tuples(inner, inner, inner, inner).map(
        lambda t: (
            f"where({t[0][0]} > {t[1][0]}, {t[2][0]}, {t[3][0]})",
            f"np.where({t[0][1]} > {t[1][1]}, {t[2][1]}, {t[3][1]})",
        )
    )
    unary = st.one_of(
        inner.map(lambda a: (f"abs({a[0]})", f"np.abs({a[1]})")),
        inner.map(lambda a: (f"exp({a[0]} * 0.1)", f"np.exp({a[1]} * 0.1)")),
        inner.map(lambda a: (f"(-{a[0]})", f"(-{a[1]})")),
    )
    return st.one_of(
        binary("+"),
        binary("-"),
        binary("*"),
        call("max", "np.maximum"),
        call("min", "np.minimum"),
        select,
        unary,
    )


EXPRESSIONS = st.recursive(leaf(), extend, max_leaves=6)
_count = itertools.count()


def build(tmp: Path, body: str) -> object:
    name = f"fuzz_kernel_{next(_count)}"
    path = tmp / f"{name}.py"
    path.write_text(
        "from sparsecomp.script import *\n\n"
        "@kernel\n"
        'def k(A: Tensor[f64, ("M", "N"), "csr"], B: Tensor[f64, ("M", "N")],\n'
        '      x: Tensor[f64, "N"], y: Tensor[f64, "M"], D: Tensor[f64, ("N", "L")]):\n'
        f"{body}"
    )
    return import_file(path).k


def statement(expr: tuple[str, str], form: str) -> tuple[str, str]:
    """The kernel's body for ``form`` over the expression, and its numpy reference."""
    source, reference = expr
    if "A" not in reference and "B" not in reference:
        source, reference = f"({source}) + B[i, j]", f"({reference}) + B"
    body = {
        "map": f"    C[i, j] = {source}\n    return C\n",
        "rows": f"    r[i] += {source}\n    return r\n",
        "product": f"    P[i, l] += ({source}) * D[j, l]\n    return P\n",
    }[form]
    return body, reference


def operands(
    reference: str, form: str, shape: tuple[int, int], density: float, seed: int
) -> tuple[tuple[Any, ...], np.ndarray]:
    """The kernel's arguments (A, B, x, y, D) and numpy's result."""
    rng = np.random.default_rng(seed)
    A = sp.random(*shape, density=density, format="csr", random_state=seed)
    B = rng.standard_normal(shape)
    x, y = rng.standard_normal(shape[1]), rng.standard_normal(shape[0])
    D = rng.standard_normal((shape[1], 3))
    names = {"np": np, "A": A.toarray(), "B": B, "x": x, "y": y}
    dense = np.broadcast_to(eval(reference, names), shape)
    want = {"map": dense, "rows": dense.sum(1), "product": dense @ D}[form]
    return (A, B, x, y, D), want


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    expr=EXPRESSIONS,
    form=st.sampled_from(["map", "rows", "product"]),
    shape=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    density=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**31),
)
def test_random_kernels_match_numpy(
    tmp_path: Path,
    expr: tuple[str, str],
    form: str,
    shape: tuple[int, int],
    density: float,
    seed: int,
) -> None:
    body, reference = statement(expr, form)
    (A, B, x, y, D), want = operands(reference, form, shape, density, seed)
    kernel = build(tmp_path, body)
    try:
        got = kernel(A, B, x, y, D)
    except SparsecompError as e:  # a refusal is fine when it says why
        refused = e.message
        assume(not refused)  # not counted: too many refusals fail the test (Unsatisfiable)
    got = got.to_scipy().toarray() if hasattr(got, "to_scipy") else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=body)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    expr=EXPRESSIONS,
    form=st.sampled_from(["map", "rows", "product"]),
    shape=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    seed=st.integers(0, 2**31),
)
def test_stage_ii_printed_as_python_computes_the_same(
    tmp_path: Path, expr: tuple[str, str], form: str, shape: tuple[int, int], seed: int
) -> None:
    """The random kernel at stage II, printed as Python (``@loops``), run, compiled:
    its result equals numpy's (what a developer who edits the printed loops gets)."""
    from sparsecomp.compiler.driver import compile as compile_mlir
    from sparsecomp.ir.context import make_context
    from sparsecomp.script.printer import to_python
    from sparsecomp.transforms.pipeline import build_pass_manager

    body, reference = statement(expr, form)
    kernel = build(tmp_path, body)
    with make_context() as ctx:
        try:
            module = kernel.module()  # type: ignore[attr-defined]
            module = type(module).parse(str(module))
            build_pass_manager("sparsecomp-cpu-layouts,sparsecomp-cpu-loops", ctx).run(
                module.operation
            )
        except SparsecompError as e:
            assume(not e.message)
        python = to_python(module)  # dense statements and upstream ones stay linalg
    name = f"printed_stage_ii_{next(_count)}"
    path = tmp_path / f"{name}.py"
    path.write_text(python)
    exe = compile_mlir(str(import_file(path).MODULE))
    (A, B, x, y, D), want = operands(reference, form, shape, 0.4, seed)
    got = exe.functions["k"](A, B, x, y, D)
    got = got.to_scipy().toarray() if hasattr(got, "to_scipy") else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=python)
