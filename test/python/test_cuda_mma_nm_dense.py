"""n:m layouts on the dense tensor cores (issue 41, item 4).

``mma.sp`` takes 2:4 in f16 (tf32 only 1:2, a pattern 2:4 does not imply),
with its own metadata words. Every other n:m product whose groups tile an
MMA's ``k`` (2:4 in f32, 1:2, 1:4, 2:8, 4:8 ...; indices as metadata) took
the scalar schedule; it now runs on ``mma.sync``
(:mod:`sparsecomp.lowering.mma_nm_dense_kernels`): each lane expands its A
elements from its group's kept values and indices. The emulator places the
fragment registers where the PTX ISA puts them, so the result is right only
if the expansion picks the right value for every column: checked against
numpy with rows, groups and columns that divide nothing; a kernel that
compares the wrong index must give a wrong answer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from gpu_rebuild import rebuild
from long_runs import strength
from mma_reference import DTYPES as _DTYPES
from mma_reference import PRODUCT as PROGRAM
from mma_reference import reference as _want
from sparsecomp.compiler import cuda
from sparsecomp.formats import SparseTensor
from sparsecomp.sparsify import sparsify

#: (N, M, inputs, accumulator)
CASES = [
    (2, 4, "f32", "f32"),
    (1, 2, "f32", "f32"),
    (2, 8, "f32", "f32"),
    (1, 4, "f16", "f32"),
    (4, 8, "f16", "f16"),
    (4, 16, "f16", "f32"),
]


@pytest.fixture(scope="module")
def kernels() -> dict[tuple[int, int, str, str], sparsecomp.Executable]:
    return {
        case: sparsecomp.compile(
            PROGRAM.format(sparsity=f"nm[{case[0]}, {case[1]}]", el=case[2], acc=case[3]),
            "cuda-emu:sm_90",
        )
        for case in CASES
    }


def _operands(case, rows: int, k: int, n: int, seed: int):
    nn, m, el, acc = case
    rng = np.random.default_rng(seed)
    a = sparsify(rng.standard_normal((rows, k)).astype(_DTYPES[el]), f"nm:{nn}:{m}")
    b = rng.standard_normal((k, n)).astype(_DTYPES[el])
    cin = rng.standard_normal((rows, n)).astype(_DTYPES[acc])
    return SparseTensor.from_dense(a, f"nm:{nn}:{m}"), a, b, cin


@settings(deadline=None, max_examples=strength(20, 60))
@given(
    case=st.sampled_from(CASES),
    rows=st.integers(1, 50),
    k=st.integers(1, 45),
    n=st.sampled_from([1, 9, 32, 40]),
    seed=st.integers(0, 1000),
)
def test_nm_on_dense_mmas_matches_numpy(kernels, case, rows, k, n, seed) -> None:
    tensor, a, b, cin = _operands(case, rows, k, n, seed)
    got = kernels[case](tensor, b, cin)
    want = _want(case[2], a, b, cin)
    scale = 1 + np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + np.abs(cin)
    tol = 2e-6 if case[3] == "f32" else 2**-10 * (-(-k // 16) + 1)
    assert np.all(np.abs(got - want) <= tol * scale), np.abs(got - want).max()


def test_nm_products_run_on_mma_sync_and_assemble(kernels) -> None:
    for (nn, m, el, acc), exe in kernels.items():
        gpu = (exe.directory / "gpu.mlir").read_text()
        assert f"__sparse_iter_nm_mma_dense_{nn}x{m}_{el}" in gpu
        assert "mma.sp" not in gpu
    (said,) = kernels[(2, 4, "f32", "f32")].manifest["remarks"]
    assert "this 2:4 product runs on the dense tensor cores, not the sparse ones" in said
    assert "(tf32 only 1:2)" in said
    assert not kernels[(1, 2, "f32", "f32")].manifest["remarks"]
    for chip in ("sm_80", "sm_90"):
        for case, instruction in (
            ((2, 4, "f32", "f32"), "m16n8k8.row.col.f32.tf32.tf32.f32"),
            ((4, 8, "f16", "f16"), "m16n8k16.row.col.f16.f16.f16.f16"),
        ):
            program = PROGRAM.format(sparsity=f"nm[{case[0]}, {case[1]}]", el=case[2], acc=case[3])
            (text,) = [t for t in cuda.ptx(program, f"cuda:{chip}").values() if "mma" in t]
            assert f"mma.sync.aligned.{instruction}" in text
            assert cuda.assemble(text, chip)


def test_a_wrong_index_comparison_gives_a_wrong_answer(kernels, tmp_path: Path) -> None:
    """Compare each kept entry's index with the column's position plus one: the emulated
    MMA then multiplies misplaced values (the original, rebuilt, is right)."""
    exe = kernels[(2, 4, "f32", "f32")]
    schedule = (exe.directory / "gpu.mlir").read_text()
    compare = next(line for line in schedule.splitlines() if "arith.cmpi eq" in line)
    lhs, rhs = compare.split("arith.cmpi eq, ")[1].split(" :")[0].split(", ")
    mutated = schedule.replace(compare, compare.replace(f"{lhs}, {rhs}", f"{lhs}, %c1"), 1)
    assert mutated != schedule
    tensor, a, b, cin = _operands((2, 4, "f32", "f32"), 33, 27, 16, 5)
    want = _want("f32", a, b, cin)
    np.testing.assert_allclose(rebuild(schedule, exe, tmp_path / "same")(tensor, b, cin), want,
                               rtol=1e-5, atol=1e-4)  # fmt: skip
    wrong = rebuild(mutated, exe, tmp_path / "wrong")(tensor, b, cin)
    assert not np.allclose(wrong, want, rtol=1e-3, atol=1e-3)
