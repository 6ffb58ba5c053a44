"""Small BSR blocks on tensor cores, several per MMA (issue 41, item 4).

Blocks with fewer rows or columns than an MMA tile (4x4, 8x8, 16x4 ...)
took the scalar schedule. They now run on ``mma.sync`` as ``out^T = B^T
A^T`` (:mod:`sparsecomp.lowering.mma_packed_kernels`): 8 rows of a block
row on the MMA's ``n``, ``k / C`` blocks on its ``k``, each lane gathering
the rows of ``B`` that its blocks' coordinates select. The emulator places
every lane's fragment registers where the PTX ISA puts them, so the answer
is right only if the gathers and the fragment positions agree: checked on
shapes that divide nothing (partial blocks, empty block rows, a last step
with fewer than ``k / C`` blocks); a kernel with two registers swapped must
give a wrong answer; the PTX must hold the MMA and assemble.
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

#: (R, C, inputs, accumulator): blocks of 8, fewer or more rows (a partial last slice),
#: narrower than k (several per MMA, k // C of them: the rest of k unused) or wider.
CASES = [
    (4, 4, "f32", "f32"),
    (8, 8, "f32", "f32"),
    (3, 3, "f32", "f32"),
    (5, 7, "f32", "f32"),
    (16, 4, "f32", "f32"),
    (8, 16, "f32", "f32"),
    (4, 4, "f16", "f32"),
    (12, 3, "f16", "f32"),
    (8, 8, "f16", "f16"),
    (4, 32, "f16", "f16"),
]


@pytest.fixture(scope="module")
def kernels() -> dict[tuple[int, int, str, str], sparsecomp.Executable]:
    return {
        (r, c, el, acc): sparsecomp.compile(
            PROGRAM.format(sparsity=f"block[{r}, {c}]", el=el, acc=acc), "cuda-emu:sm_90"
        )
        for r, c, el, acc in CASES
    }


def _operands(case, m: int, k: int, n: int, fill: float, seed: int):
    r, c, el, acc = case
    rng = np.random.default_rng(seed)
    keep = rng.random((-(-m // r), -(-k // c))) < fill
    a = (rng.standard_normal((m, k)) * np.kron(keep, np.ones((r, c)))[:m, :k]).astype(_DTYPES[el])
    b = rng.standard_normal((k, n)).astype(_DTYPES[el])
    cin = rng.standard_normal((m, n)).astype(_DTYPES[acc])
    return SparseTensor.from_dense(a, f"bsr:{r}x{c}"), a, b, cin


@settings(deadline=None, max_examples=strength(20, 60))
@given(
    case=st.sampled_from(CASES),
    m=st.integers(1, 60),
    k=st.integers(1, 50),
    n=st.sampled_from([1, 7, 16, 33, 64]),
    fill=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    seed=st.integers(0, 1000),
)
def test_packed_blocks_match_numpy(kernels, case, m, k, n, fill, seed) -> None:
    tensor, a, b, cin = _operands(case, m, k, n, fill, seed)
    got = kernels[case](tensor, b, cin)
    want = _want(case[2], a, b, cin)
    scale = 1 + np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + np.abs(cin)
    # f32 (tf32 inputs, f32 sums): f32 rounding; an f16 accumulator rounds each MMA's sum.
    tol = 2e-6 if case[3] == "f32" else 2**-10 * (-(-k // 8) + 1)
    assert np.all(np.abs(got - want) <= tol * scale), np.abs(got - want).max()


def test_small_blocks_run_on_tensor_cores_and_assemble(kernels) -> None:
    for (r, c, el, acc), exe in kernels.items():
        gpu = (exe.directory / "gpu.mlir").read_text()
        assert f"__sparse_iter_bsr_mma_packed_{r}x{c}_{el}" in gpu
        assert not exe.manifest.get("remarks")
    for chip in ("sm_80", "sm_90"):
        for case, instruction in (
            ((4, 4, "f32", "f32"), "m16n8k8.row.col.f32.tf32.tf32.f32"),
            ((8, 8, "f16", "f16"), "m16n8k16.row.col.f16.f16.f16.f16"),
        ):
            program = PROGRAM.format(
                sparsity=f"block[{case[0]}, {case[1]}]", el=case[2], acc=case[3]
            )
            (text,) = [t for t in cuda.ptx(program, f"cuda:{chip}").values() if "mma" in t]
            assert f"mma.sync.aligned.{instruction}" in text
            assert cuda.assemble(text, chip)


@pytest.mark.parametrize("operand", [0, 1])
def test_swapped_fragment_registers_give_a_wrong_answer(kernels, tmp_path: Path, operand) -> None:
    """Swap two elements of the B^T (0) or A^T (1) fragment a lane hands the first MMA."""
    exe = kernels[(4, 4, "f32", "f32")]
    schedule = (exe.directory / "gpu.mlir").read_text()
    mma = next(line for line in schedule.splitlines() if "nvgpu.mma.sync" in line)
    name = mma.split("(")[1].split(")")[0].split(", ")[operand]
    build = next(line for line in schedule.splitlines() if line.strip().startswith(f"{name} = "))
    elements = build.split("vector.from_elements ")[1].split(" :")[0].split(", ")
    swapped = [elements[1], elements[0], *elements[2:]]
    mutated = schedule.replace(build, build.replace(", ".join(elements), ", ".join(swapped)))
    assert mutated != schedule
    tensor, a, b, cin = _operands((4, 4, "f32", "f32"), 40, 36, 24, 0.8, 7)
    want = _want("f32", a, b, cin)
    same = rebuild(schedule, exe, tmp_path / "same")(tensor, b, cin)
    np.testing.assert_allclose(same, want, rtol=1e-5, atol=1e-4)
    wrong = rebuild(mutated, exe, tmp_path / "swapped")(tensor, b, cin)
    assert not np.allclose(wrong, want, rtol=1e-3, atol=1e-3)


def test_gpu_tf32_false_keeps_f32_blocks_on_f32_fmas() -> None:
    """``gpu_tf32=False``: an f32 block product keeps f32's precision (the scalar
    schedule, with a remark that says why); f16 products still take the tensor cores."""
    program = PROGRAM.format(sparsity="block[4, 4]", el="f32", acc="f32")
    exe = sparsecomp.compile(program, "cuda-emu:sm_90", gpu_tf32=False)
    assert "nvgpu.mma" not in (exe.directory / "gpu.mlir").read_text()
    (said,) = exe.manifest["remarks"]
    assert "f32 products stay off the tensor cores' tf32 (tf32=false)" in said
    tensor, a, b, cin = _operands((4, 4, "f32", "f32"), 30, 20, 9, 0.6, 3)
    want = a.astype(np.float64) @ b.astype(np.float64) + cin
    np.testing.assert_allclose(exe(tensor, b, cin), want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(_want("f32", a, b, cin), want, rtol=1e-5, atol=1e-5)  # tf32 differs
    half_program = PROGRAM.format(sparsity="block[4, 4]", el="f16", acc="f32")
    half = sparsecomp.compile(half_program, "cuda-emu:sm_90", gpu_tf32=False)
    assert "nvgpu.mma.sync" in (half.directory / "gpu.mlir").read_text()
