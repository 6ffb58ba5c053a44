"""Sparse tensor cores: 2:4 f16 x dense on ``mma.sp``, checked through the emulator and ptxas.

On a CUDA target a 2:4 operand is stored with ``mma.sp`` metadata
(:mod:`sparsecomp.formats.mma_sp`) and the product runs on
``nvgpu.mma.sp.sync`` (m16n8k16, f16, f32 accumulation). The emulator
places each lane's kept values by the 2-bit indices of the metadata
register the hardware reads, so the answer is right only if the kernel,
the metadata packing and the fragment layout agree: checked against numpy
on shapes that are not multiples of the tile (partial groups of 4 too);
two metadata nibbles or two A registers swapped must give a wrong answer.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from gpu_rebuild import rebuild
from long_runs import strength
from sparsecomp.compiler import cuda
from sparsecomp.formats import SparseTensor
from sparsecomp.formats.layout import standard_layout
from sparsecomp.formats.mma_sp import mma_sp_matmul_reference, to_mma_sp
from sparsecomp.formats.nm import compress_nm
from sparsecomp.sparsify import sparsify

#: The layout a 2:4 operand has on a CUDA target with m16n8k16 sparse MMAs.
MMA_SP = replace(standard_layout("nm:2:4"), nm_metadata="mma_sp_m16n8k16")
PROGRAM = """
#s = #sparse_iter.sparsity<nm[2, 4]>
func.func @spmm(%A: tensor<?x?xf16, #s>, %B: tensor<?x?xf16>,
                %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #s>, tensor<?x?xf16>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


@pytest.fixture(scope="module")
def exe() -> sparsecomp.Executable:
    return sparsecomp.compile(PROGRAM, "cuda-emu:sm_80")


def _operands(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = sparsify(rng.standard_normal((m, k)).astype(np.float16), "nm:2:4")
    return (
        a,
        rng.standard_normal((k, n)).astype(np.float16),
        rng.standard_normal((m, n)).astype(np.float32),
    )


def _want(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64) + c


@settings(deadline=None, max_examples=strength(15, 40))
@given(m=st.integers(0, 70), k=st.integers(0, 60), n=st.sampled_from([1, 7, 8, 32, 45]),
       seed=st.integers(0, 1000))  # fmt: skip
def test_sparse_tensor_core_spmm_matches_numpy(exe, m, k, n, seed) -> None:
    a, b, c = _operands(m, k, n, seed)
    got = exe(SparseTensor.from_dense(a, "nm:2:4"), b, c)
    np.testing.assert_allclose(got, _want(a, b, c), rtol=1e-5, atol=1e-4)


def test_the_product_runs_on_sparse_tensor_cores(exe) -> None:
    gpu = (exe.directory / "gpu.mlir").read_text()
    # The block-tiled kernel: per step of two k tiles, each warp's 4 row tiles times 4
    # MMA tiles of 8 columns (on the same B fragments), A and B staged in shared memory
    # between two barriers.
    assert gpu.count("nvgpu.mma.sp.sync") == 32
    assert gpu.count("gpu.barrier") == 2
    assert gpu.count("#gpu.address_space<workgroup>>") >= 2
    # Two stages: each thread's copies of A, B (two chunks) and the metadata, for the
    # first step before the loop and for the next one inside it.
    assert gpu.count("nvgpu.device_async_copy") == 8
    assert gpu.count("nvvm.cp.async.wait.group 1") == 1
    assert "gpu.shuffle" not in gpu
    assert "mma_sp_m16n8k16" in (exe.directory / "layouts.mlir").read_text()


@settings(deadline=None, max_examples=strength(3, 10))
@given(m=st.integers(129, 300), k=st.integers(33, 100), n=st.integers(129, 200),
       seed=st.integers(0, 1000))  # fmt: skip
def test_several_blocks_and_steps_match_numpy(exe, m, k, n, seed) -> None:
    """Shapes past one 128 x 128 block tile each way and one 32-column step of k."""
    a, b, c = _operands(m, k, n, seed)
    got = exe(SparseTensor.from_dense(a, "nm:2:4"), b, c)
    np.testing.assert_allclose(got, _want(a, b, c), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
def test_ptx_holds_mma_sp_and_assembles(chip) -> None:
    (text,) = cuda.ptx(PROGRAM, f"cuda:{chip}").values()
    assert "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text
    assert "cp.async.cg.shared.global" in text
    assert re.search(r"cp\.async\.wait_group\s+1;", text)
    assert cuda.assemble(text, chip)


def test_the_emulator_reads_metadata_as_the_numpy_reference_does() -> None:
    """One tile through the emulated kernel and through mma_sp_reference (numpy, written
    from the ISA's description independently of the emulator): the same product."""
    a, b, _ = _operands(16, 16, 8, 4)
    values, indices = compress_nm(a, 2, 4)
    meta = to_mma_sp(indices, 16, 4, "m16n8k16")
    reference = mma_sp_matmul_reference(values, meta, 16, 4, b, "m16n8k16")
    exe = sparsecomp.compile(PROGRAM, "cuda-emu:sm_90")
    got = exe(SparseTensor.from_dense(a, "nm:2:4"), b, np.zeros((16, 8), np.float32))
    np.testing.assert_allclose(got, reference, rtol=1e-3, atol=1e-3)


def _swap_nibbles(word: int, first: int, second: int) -> int:
    x = (word >> (4 * first)) & 0xF
    y = (word >> (4 * second)) & 0xF
    word &= ~((0xF << (4 * first)) | (0xF << (4 * second))) & 0xFFFFFFFF
    return word | (x << (4 * second)) | (y << (4 * first))


def test_swapped_metadata_nibbles_give_a_wrong_answer(exe) -> None:
    """The same values with two groups' indices exchanged in the metadata word: a
    different matrix, and the emulated kernel computes that matrix's product."""
    a, b, c = _operands(16, 16, 8, 9)
    packed = SparseTensor.from_dense(a, MMA_SP)
    buffers = dict(packed.buffers())
    meta = buffers["crd2"].copy()
    # Row 0: groups 0 and 1 (nibbles 0 and 1 of word 0) hold different index pairs.
    row0 = a[0].reshape(-1, 4) != 0
    assert not np.array_equal(row0[0], row0[1]), "pick a seed whose groups differ"
    meta[0] = _swap_nibbles(int(meta[0]), 0, 1)
    mutated = SparseTensor.from_buffers(a.shape, MMA_SP, [None] * 3, [None, None, meta],
                                        buffers["values"])  # fmt: skip
    right = exe(packed, b, c)
    np.testing.assert_allclose(right, _want(a, b, c), rtol=1e-5, atol=1e-4)
    wrong = exe(mutated, b, c)
    assert not np.allclose(wrong, right, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(wrong, _want(mutated.to_dense(), b, c), rtol=1e-5, atol=1e-4)


def test_swapped_a_registers_give_a_wrong_answer(exe, tmp_path: Path) -> None:
    """Rows g and g + 8 exchanged in the A fragment a lane passes: wrong (the original,
    rebuilt, is right)."""
    schedule = (exe.directory / "gpu.mlir").read_text()
    mma = next(line for line in schedule.splitlines() if "nvgpu.mma.sp.sync" in line)
    name = mma.split("(")[1].split(",")[0]
    build = next(line for line in schedule.splitlines() if line.strip().startswith(f"{name} = "))
    elements = build.split("vector.from_elements ")[1].split(" :")[0].split(", ")
    swapped = [*elements[2:], *elements[:2]]
    mutated = schedule.replace(build, build.replace(", ".join(elements), ", ".join(swapped)))
    assert mutated != schedule
    a, b, c = _operands(20, 24, 8, 2)
    t = SparseTensor.from_dense(a, "nm:2:4")
    same = rebuild(schedule, exe, tmp_path / "same")(t, b, c)
    np.testing.assert_allclose(same, _want(a, b, c), rtol=1e-5, atol=1e-4)
    wrong = rebuild(mutated, exe, tmp_path / "swapped")(t, b, c)
    assert not np.allclose(wrong, _want(a, b, c), rtol=1e-3, atol=1e-3)


def test_profile_counts_sparse_mmas() -> None:
    """32 columns of k (2 k tiles) in one 128 x 128 block tile: each of 8 warps issues
    4 row tiles x 4 column tiles x 2 = 32 MMAs of 16 * 8 * 16 (past the matrix too),
    counted at the 2:4 peak."""
    exe = sparsecomp.compile(PROGRAM, "cuda-emu:sm_80", profile=True)
    a, b, c = _operands(32, 32, 8, 1)
    p = exe.profile(SparseTensor.from_dense(a, "nm:2:4"), b, c)
    np.testing.assert_allclose(p.result, _want(a, b, c), rtol=1e-5, atol=1e-4)
    assert p.mma_instructions == {4: 256}
    assert p.h100_tensor_seconds == pytest.approx(256 * 2 * 16 * 8 * 16 / 1978.9e12)
    assert "MMA 2:4 f16: 256 warp instructions" in str(p)


def test_operands_off_16_bytes_take_the_masked_loads(exe) -> None:
    """Sizes whose rows all start on 16 bytes (k a multiple of 16, n of 8), with B a view
    starting one element into its buffer: the kernel must not issue its aligned 16-byte
    loads (a misaligned one faults on a GPU and may on the host) and still gives the
    product."""
    a, b, c = _operands(40, 64, 16, 3)
    storage = np.zeros(b.size + 1, np.float16)
    shifted = storage[1:].reshape(b.shape)
    shifted[...] = b
    assert shifted.ctypes.data % 16 != 0
    got = exe(SparseTensor.from_dense(a, "nm:2:4"), shifted, c)
    np.testing.assert_allclose(got, _want(a, b, c), rtol=1e-5, atol=1e-4)


#: Loads a rebuilt executable and calls it on saved operands (in a process of its own:
#: a misaligned access aborts it, as it would end a GPU's context).
CALL_REBUILT = """
import sys
import numpy as np
import sparsecomp
from sparsecomp.formats import SparseTensor
exe = sparsecomp.load(sys.argv[1])
a, b, c = (np.load(f"{sys.argv[2]}/{name}.npy") for name in "abc")
print(np.asarray(exe(SparseTensor.from_dense(a, "nm:2:4"), b, c)).sum())
"""


def test_a_false_alignment_claim_stops_the_emulated_kernel(exe, tmp_path: Path) -> None:
    """The emulator checks the address of each access that declares an alignment, where a
    GPU faults on a misaligned one: A's fragment loads from shared memory claiming 8
    bytes (their addresses have 4) stop the process with a message naming the access;
    the kernel as built runs."""
    schedule = (exe.directory / "gpu.mlir").read_text()
    claims = schedule.replace("{alignment = 4 : i64}", "{alignment = 8 : i64}")
    assert claims != schedule
    a, b, c = _operands(32, 32, 8, 1)
    for name, array in zip("abc", (a, b, c), strict=True):
        np.save(tmp_path / f"{name}.npy", array)
    runs = {}
    for kind, text in (("as built", schedule), ("claims", claims)):
        rebuild(text, exe, tmp_path / kind.replace(" ", "_"))
        runs[kind] = subprocess.run(
            [sys.executable, "-c", CALL_REBUILT, str(tmp_path / kind.replace(" ", "_")),
             str(tmp_path)], capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    assert runs["as built"].returncode == 0, runs["as built"].stderr[-2000:]
    assert runs["claims"].returncode != 0
    assert "'vector.load' needs 8-byte alignment" in runs["claims"].stderr
    assert "misaligned address" in runs["claims"].stderr
