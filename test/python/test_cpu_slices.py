"""SpMM run a slice of ``B``'s rows at a time (``slice_bytes``, lowering/slices.py).

A budget of 1 byte asks for as many slices as the rows allow (``MIN_RUN``
entries per row and slice on average, rows of ``B`` of ``MIN_ROW_BYTES`` or
more): rows of 60-300 entries run 2-9 slices where ``K`` is 64 or more (32
in f64); sparse rows and narrow ``B``'s a single slice. Results are checked
against scipy, and against the unsliced kernel bit for bit (the entries are
visited in the same order).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpu_kernels as K
import sparsecomp
from sparsecomp.errors import FormatError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import specialize

pytestmark = pytest.mark.usefixtures("private_cache")

#: SpMM as MLIR's own sparse tests write it: index-typed CSR, C an outs operand.
UPSTREAM = K.spmm_upstream()


def matrix(rows: int, cols: int, density: float, seed: int, dtype: type) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return sp.random(rows, cols, density=density, format="csr", random_state=rng, dtype=dtype)


def dense(shape: tuple[int, int], dtype: type, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.fixture(scope="module")
def kernels() -> dict[tuple[str, int], object]:
    """SpMM over CSR and DCSR (rows stored sparsely: the output is filled first)
    per element type, sliced (budget 1) and not (budget 0)."""
    return {
        (layout, elt, budget): sparsecomp.compile(K.spmm(layout, elt), slice_bytes=budget)
        for layout in ("csr", "dcsr")
        for elt in ("f32", "f64")
        for budget in (0, 1)
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 90),
    cols=st.integers(1, 300),
    k=st.sampled_from([1, 33, 64, 70]),
    density=st.sampled_from([0.02, 0.3, 0.7, 1.0]),
    elt=st.sampled_from(["f32", "f64"]),
    layout=st.sampled_from(["csr", "dcsr"]),
    packed=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sliced_spmm_agrees_with_scipy_and_the_unsliced_kernel(
    kernels: dict,
    rows: int,
    cols: int,
    k: int,
    density: float,
    elt: str,
    layout: str,
    packed: bool,
    seed: int,
) -> None:
    dtype = np.float32 if elt == "f32" else np.float64
    a = matrix(rows, cols, density, seed, dtype)
    b = dense((cols, k), dtype, seed + 1)
    operand = SparseTensor.from_scipy(a, layout) if packed else a
    sliced = kernels[layout, elt, 1](operand, b)
    unsliced = kernels[layout, elt, 0](operand, b)
    np.testing.assert_array_equal(sliced, unsliced)
    tol = 1e-4 if elt == "f32" else 1e-12
    np.testing.assert_allclose(sliced, a @ b, rtol=tol, atol=tol)


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_outs_operand_and_out_accumulate_across_slices(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream form's outs operand C starts the first slice (C + A B), and
    ``out=C`` accumulates into the caller's array through every slice."""
    if not native:
        monkeypatch.setenv("SPARSECOMP_NATIVE_CALLS", "0")
    exe = sparsecomp.compile(UPSTREAM, slice_bytes=1)
    a = matrix(70, 256, 0.6, 3, np.float64)
    b, c = dense((256, 40), np.float64, 4), dense((70, 40), np.float64, 5)
    for _ in range(3):  # the first calls compile and route, the last runs in C
        np.testing.assert_allclose(exe(a, b, c), c + a @ b, rtol=1e-12, atol=1e-12)
    into = c.copy()
    exe(a, b, into, out=into)
    np.testing.assert_allclose(into, c + a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("where", [0, -1, "middle"])
def test_a_bad_index_in_a_sliced_row_raises(
    where: int | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scipy operand's coordinates are checked by the sliced kernel as by the
    unsliced one (the slice's loop stays inside its row): an index the caller
    broke after calls that passed raises FormatError."""
    monkeypatch.setattr(specialize, "GUARD_FROM", 1)
    exe = sparsecomp.compile(UPSTREAM.replace("@spmm", "@spmm_guarded"), slice_bytes=1)
    a = matrix(130, 256, 0.5, 6, np.float64)
    b, c = dense((256, 40), np.float64, 7), np.zeros((130, 40))
    for _ in range(3):
        np.testing.assert_allclose(exe(a, b, c), a @ b, rtol=1e-12, atol=1e-12)
    at = a.indices.shape[0] // 2 if where == "middle" else where
    a.indices[at] = 256 if where != "middle" else -1
    with pytest.raises(FormatError, match="index is out of range"):
        exe(a, b, c)


def test_bad_budget_is_refused() -> None:
    with pytest.raises(Exception, match="slice_bytes= must be >= 0"):
        sparsecomp.compile(K.spmm("csr"), slice_bytes=-1)
