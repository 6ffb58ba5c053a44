"""exe.prepare's tournament: the row sample, call operands shaped as the signature says,
the decision rule (fastest measured, CSR unless another beats it by the margin) and the
whole path against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.formats.choice import Choice
from sparsecomp.formats.programs import program
from sparsecomp.runtime import tournament
from sparsecomp.runtime.abi import ArgSpec, Signature

pytestmark = pytest.mark.usefixtures("private_cache")


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 400),
    density=st.floats(0, 0.3),
    budget=st.integers(1, 600),
    blocks=st.integers(1, 6),
    align=st.sampled_from([1, 4, 16]),
    seed=st.integers(0, 100),
)
def test_the_sample_is_aligned_runs_of_whole_rows(
    rows: int, density: float, budget: int, blocks: int, align: int, seed: int
) -> None:
    a = sp.random(rows, 40, density=density, format="csr", random_state=seed)
    a = sp.hstack([sp.csr_matrix(np.arange(1.0, rows + 1)[:, None]), a], format="csr")
    sample = tournament.sample_rows(a, budget, blocks, align)
    assert sample.shape[1] == a.shape[1]
    if a.nnz <= budget or rows <= blocks * align:
        assert (sample != a).nnz == 0
        return
    source = sample[:, 0].toarray().ravel().astype(int) - 1  # column 0 names each row
    assert np.array_equal(sample[:, 1:].toarray(), a[source, 1:].toarray())  # whole rows
    runs = np.split(source, np.flatnonzero(np.diff(source) != 1) + 1)
    starts = [int(r[0]) for r in runs]
    assert starts == sorted(set(starts))
    assert all(s % align == 0 for s in starts)
    assert all(len(r) % align == 0 or r[-1] == rows - 1 for r in runs)
    share, widest = budget // blocks, int(np.diff(a.indptr).max())
    assert sample.nnz <= blocks * (2 * share + align * widest)


def _spec(kind: str, shape: tuple, dtype=np.float32) -> ArgSpec:
    return ArgSpec(kind, np.dtype(dtype), shape)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # SpMM as our examples write it: A[?, s0], B[s0, ?]
        ([_spec("sparse", (None, "s0")), _spec("dense", ("s0", None))], [(30, 7)]),
        # upstream form with an outs operand: A[s0, s1], B[s1, s2], C[s0, s2]
        (
            [
                _spec("sparse", ("s0", "s1")),
                _spec("dense", ("s1", "s2")),
                _spec("dense", ("s0", "s2")),
            ],
            [(30, 7), (20, 7)],
        ),
        # SDDMM: S[s0, s1], X[s0, ?], Y[s1, ?], a scalar, an int vector of static size
        (
            [
                _spec("sparse", ("s0", "s1")),
                _spec("dense", ("s0", None)),
                _spec("dense", ("s1", None), np.float64),
                _spec("scalar", ()),
                _spec("dense", (4,), np.int32),
            ],
            [(20, 7), (30, 7), (), (4,)],
        ),
    ],
)
def test_call_operands_follow_the_signature(args: list[ArgSpec], expected: list[tuple]) -> None:
    signature = Signature("f", "f", tuple(args), ())
    got = tournament.call_args(signature, 0, (20, 30), 7)
    assert got[0] is None
    assert [np.shape(g) for g in got[1:]] == expected
    assert [np.asarray(g).dtype for g in got[1:]] == [a.dtype for a in args[1:]]


@pytest.mark.parametrize(
    ("times", "chosen"),
    [
        ({"csr": 1.0, "ell": 0.5, "bsr:2x2": 0.7}, "ell"),  # the fastest
        ({"csr": 1.0, "ell": 0.95, "bsr:2x2": 2.0}, "csr"),  # not faster by the margin
        ({"csr": 1.0, "ell": 3.0, "bsr:2x2": 1.5}, "csr"),  # the model was wrong
    ],
)
def test_the_fastest_measured_wins_by_the_margin(
    times: dict[str, float], chosen: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def variant_for(name: str):
        def run(*args):
            calls.append(name)
            assert args[0].layout == sparsecomp.formats.parse_layout(name)

        run.layout = name  # type: ignore[attr-defined]
        return run

    def timed(variant, args):  # the time of the layout just called
        variant(*args)
        return times[calls[-1]]

    monkeypatch.setattr(tournament, "_time", timed)
    signature = Signature(
        "f", "f", (ArgSpec("sparse", np.dtype(np.float32), (None, "s0")),
                   ArgSpec("dense", np.dtype(np.float32), ("s0", None))), ()
    )  # fmt: skip
    model = Choice("bsr:2x2", "the model's reason", 0.001, {"bsr:2x2": 1, "csr": 2, "ell": 3})
    a = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=0)
    got = tournament.tournament(signature, 0, a, model, 8, variant_for)
    assert got.layout == chosen
    assert set(got.measured) == {"csr", "ell", "bsr:2x2"}
    assert got.why.startswith("the model's reason; timed on 200 nonzeros: csr 1e+03 ms")
    assert ("the model's pick was bsr:2x2" in got.why) == (chosen != "bsr:2x2")
    assert got.seconds >= model.seconds


def test_large_dense_operands_leave_the_model_to_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tournament, "OPERAND_BYTES", 1000)
    signature = Signature(
        "f", "f", (ArgSpec("sparse", np.dtype(np.float32), (None, "s0")),
                   ArgSpec("dense", np.dtype(np.float32), ("s0", None))), ()
    )  # fmt: skip
    model = Choice("ell", "the model's reason", 0.001, {"ell": 1, "csr": 2})
    a = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=0)
    got = tournament.tournament(signature, 0, a, model, 8, lambda name: pytest.fail(name))
    assert got.layout == "ell"
    assert got.measured == {}
    assert got.why.endswith("not timed: the call's dense operands (0 MB) are too large")


@pytest.mark.parametrize("op", ["spmm", "spmv", "sddmm"])
def test_prepare_times_a_shortlist_and_matches_scipy(op: str) -> None:
    """The whole path, timing real variants (the choice itself depends on the machine)."""
    rng = np.random.default_rng(5)
    a = sp.random(120, 90, density=0.08, format="csr", dtype=np.float32, random_state=6)
    exe = sparsecomp.compile(program(op, "csr"))
    prepared = exe.prepare(a, k=6)
    choice = prepared.choice
    assert choice is not None
    assert "csr" in choice.measured
    assert prepared.layout in choice.measured
    fastest = min(choice.measured, key=choice.measured.__getitem__)
    assert prepared.layout in ("csr", fastest)
    assert choice.measured[prepared.layout] <= choice.measured["csr"]
    if op == "spmm":
        b = rng.standard_normal((90, 6)).astype(np.float32)
        np.testing.assert_allclose(exe(prepared, b), a @ b, rtol=1e-4, atol=1e-4)
    elif op == "spmv":
        x = rng.standard_normal(90).astype(np.float32)
        np.testing.assert_allclose(exe(prepared, x), a @ x, rtol=1e-4, atol=1e-4)
    else:
        xs = rng.standard_normal((120, 6)).astype(np.float32)
        ys = rng.standard_normal((90, 6)).astype(np.float32)
        got = exe(prepared, xs, ys).to_dense()
        np.testing.assert_allclose(got, a.multiply(xs @ ys.T).toarray(), atol=1e-4)


@pytest.mark.parametrize("pick", ["bsr:2x2", "csr"])
def test_a_candidate_that_does_not_compile_leaves_the_race(
    pick: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shortlisted layout the kernel has no form for (a complex SpMV has no composable
    one) raised CompileError out of prepare(); it now leaves the race, and the why says
    so. CSR's own error is still the caller's."""
    from sparsecomp.errors import CompileError

    monkeypatch.setattr(tournament, "_time", lambda variant, args: 1.0)

    def variant_for(name: str):
        if name == "bsr:2x2":
            raise CompileError("<variant>:2:1: error: no form for it")
        return lambda *args: None

    signature = Signature(
        "f", "f", (ArgSpec("sparse", np.dtype(np.float32), (None, "s0")),
                   ArgSpec("dense", np.dtype(np.float32), ("s0", None))), ()
    )  # fmt: skip
    model = Choice(pick, "the model's reason", 0.001, {"bsr:2x2": 1, "csr": 2, "ell": 3})
    a = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=0)
    got = tournament.tournament(signature, 0, a, model, 8, variant_for)
    assert got.layout == "csr"
    assert set(got.measured) == {"csr", "ell"}
    assert "bsr:2x2 does not compile for this kernel" in got.why

    def broken(name: str):
        raise CompileError(f"{name}: error: nothing compiles")

    with pytest.raises(CompileError, match="nothing compiles"):
        tournament.tournament(signature, 0, a, model, 8, broken)


COMPLEX_SPMV = """
func.func @spmv(%A: tensor<?x?xcomplex<f64>, #sparse_iter.sparsity<unstructured>>,
                %x: tensor<?xcomplex<f64>>) -> tensor<?xcomplex<f64>> {
  %c0 = arith.constant 0 : index
  %zero = complex.constant [0.0 : f64, 0.0 : f64] : complex<f64>
  %m = tensor.dim %A, %c0 : tensor<?x?xcomplex<f64>, #sparse_iter.sparsity<unstructured>>
  %e = tensor.empty(%m) : tensor<?xcomplex<f64>>
  %y0 = linalg.fill ins(%zero : complex<f64>) outs(%e : tensor<?xcomplex<f64>>)
      -> tensor<?xcomplex<f64>>
  %y = linalg.matvec ins(%A, %x : tensor<?x?xcomplex<f64>, #sparse_iter.sparsity<unstructured>>,
                                  tensor<?xcomplex<f64>>)
                     outs(%y0 : tensor<?xcomplex<f64>>) -> tensor<?xcomplex<f64>>
  return %y : tensor<?xcomplex<f64>>
}
"""


def test_prepare_of_a_complex_spmv_without_a_layout() -> None:
    """The model shortlists composable layouts (hyb, bsr+csr), which a complex kernel
    has no form for: prepare() chose among the others instead of failing."""
    a = sp.random(300, 300, density=0.02, random_state=2, format="csr") * (1 + 2j)
    a = (a + sp.eye(300)).tocsr()
    x = np.arange(300) * (1 - 1j)
    exe = sparsecomp.compile(COMPLEX_SPMV)
    prepared = exe.prepare(a)
    np.testing.assert_allclose(exe(prepared, x), a @ x)
