"""Tensor cores: BSR x dense on ``mma.sync``, checked through the emulator and ptxas.

The BSR product of a CUDA function becomes a kernel whose warps issue
``nvgpu.mma.sync`` (tf32 for f32). Under ``cuda-emu`` every lane's fragment
registers are scattered and gathered where the PTX ISA puts them, so the
answer is right only if the kernel loads each element into the right lane
and register: checked against a tf32-rounded reference on shapes that are
not multiples of the blocks, the MMA tile or the column groups, with empty
block rows; and a kernel with two registers swapped must give a wrong one.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from gpu_rebuild import rebuild
from long_runs import strength
from mma_reference import tf32 as _tf32
from sparsecomp.compiler import cuda
from sparsecomp.formats import SparseTensor, parse_layout
from sparsecomp.formats.layout import standard_layout
from sparsecomp.targets.fragments import M16N8K8_TF32, M16N8K16_F16, SHAPES

BLOCKS = [(16, 8), (32, 8), (16, 16), (32, 16)]

OURS = """
#bsr = #sparse_iter.layout<{{map = (i, j) -> (i floordiv {r} : dense, j floordiv {c} : compressed,
                                             i mod {r} : dense, j mod {c} : dense),
                             posWidth = 32, crdWidth = 32}}>
func.func @spmm(%A: tensor<?x?xf32, #bsr>, %B: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #bsr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""

#: Upstream syntax: MLIR's BSR encoding (index-typed buffers), an outs operand.
UPSTREAM = """
#BSR = #sparse_tensor.encoding<{
  map = (i, j) -> (i floordiv 16 : dense, j floordiv 8 : compressed,
                   i mod 16 : dense, j mod 8 : dense)
}>
func.func @spmm(%A: tensor<?x?xf32, #BSR>, %B: tensor<?x?xf32>,
                %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #BSR>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


def _block_matrix(m: int, k: int, r: int, c: int, fill: float, seed: int) -> sp.csr_matrix:
    """An m x k matrix whose nonzeros come in r x c blocks (some of them partial)."""
    rng = np.random.default_rng(seed)
    mask = rng.random((-(-m // r), -(-k // c))) < fill
    dense = np.kron(mask, np.ones((r, c)))[:m, :k] * rng.standard_normal((m, k))
    return sp.csr_matrix(dense.astype(np.float32))


@pytest.fixture(scope="module")
def kernels() -> dict[tuple[int, int], sparsecomp.Executable]:
    return {(r, c): sparsecomp.compile(OURS.format(r=r, c=c), "cuda-emu:sm_80") for r, c in BLOCKS}


def test_fragment_table_is_the_ptx_isa() -> None:
    """Entries transcribed by hand from the PTX ISA's fragment figures, lane 5 (group 1,
    thread 1) and lane 31 (group 7, thread 3); and every tile element held exactly once."""
    tf32, f16 = M16N8K8_TF32, M16N8K16_F16
    assert [tf32.a.position(5, i) for i in range(4)] == [(1, 1), (9, 1), (1, 5), (9, 5)]
    assert [tf32.a.position(31, i) for i in range(4)] == [(7, 3), (15, 3), (7, 7), (15, 7)]
    assert [tf32.b.position(5, i) for i in range(2)] == [(1, 1), (5, 1)]
    assert [tf32.b.position(31, i) for i in range(2)] == [(3, 7), (7, 7)]
    assert [tf32.c.position(5, i) for i in range(4)] == [(1, 2), (1, 3), (9, 2), (9, 3)]
    assert [f16.a.position(5, i) for i in range(8)] == [
        (1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]  # fmt: skip
    assert [f16.b.position(31, i) for i in range(4)] == [(6, 7), (7, 7), (14, 7), (15, 7)]
    for shape in SHAPES.values():
        for frag, rows, cols in ((shape.a, shape.m, shape.k), (shape.b, shape.k, shape.n),
                                 (shape.c, shape.m, shape.n)):  # fmt: skip
            held = sorted(frag.position(lane, i) for lane in range(32) for i in range(frag.count))
            assert held == [(i, j) for i in range(rows) for j in range(cols)]


@settings(deadline=None, max_examples=strength(20, 60))
@given(
    blocks=st.sampled_from(BLOCKS),
    m=st.integers(1, 90),
    k=st.integers(1, 70),
    n=st.sampled_from([1, 5, 8, 31, 33, 64]),
    fill=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
    seed=st.integers(0, 1000),
)
def test_tensor_core_spmm_matches_scipy(kernels, blocks, m, k, n, fill, seed) -> None:
    r, c = blocks
    a = _block_matrix(m, k, r, c, fill, seed)
    b = np.random.default_rng(seed).standard_normal((k, n)).astype(np.float32)
    got = kernels[blocks](SparseTensor.from_scipy(a, f"bsr:{r}x{c}"), b)
    want = _tf32(a.toarray()) @ _tf32(b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * (1 + np.abs(want).max()))
    # And within tf32's precision of the exact product.
    exact = a.toarray().astype(np.float64) @ b
    np.testing.assert_allclose(got, exact, rtol=0, atol=4e-3 * (1 + np.abs(exact).max()))


def test_the_product_runs_on_tensor_cores(kernels) -> None:
    gpu = (kernels[(32, 16)].directory / "gpu.mlir").read_text()
    # 2 k slices of 8 per block times 4 groups of 8 columns per warp.
    assert gpu.count("nvgpu.mma.sync") == 8
    assert "tf32Enabled" in gpu


def test_upstream_bsr_with_outs_operand() -> None:
    """MLIR's BSR encoding (64-bit indices) with the caller's C: out = A B + C."""
    exe = sparsecomp.compile(UPSTREAM, "cuda-emu:sm_90")
    assert "__sparse_iter_bsr_mma_16x8_f32_i64_i64" in (exe.directory / "gpu.mlir").read_text()
    a = _block_matrix(50, 40, 16, 8, 0.4, 3)
    rng = np.random.default_rng(3)
    b = rng.standard_normal((40, 20)).astype(np.float32)
    c = rng.standard_normal((50, 20)).astype(np.float32)
    layout = standard_layout("bsr:16x8").with_widths(64, 64)
    got = exe(SparseTensor.from_scipy(a, layout), b, c)
    want = _tf32(a.toarray()) @ _tf32(b) + c
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
def test_ptx_holds_mma_sync_and_assembles(chip) -> None:
    kernels = cuda.ptx(OURS.format(r=16, c=8), f"cuda:{chip}")
    # the tensor-core kernel, and the fill of its zero start on the GPU (a 2-D loop)
    assert len(kernels) == 2
    (text,) = [t for t in kernels.values() if "mma.sync" in t]
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text
    assert cuda.ptxas() is not None, "the test extra installs nvidia-cuda-nvcc (ptxas)"
    for ptx in kernels.values():
        assert cuda.assemble(ptx, chip)


def _mma_operands(schedule: str, operand: int) -> tuple[str, str]:
    """The first MMA's ``operand`` (0: A, 1: B) and the line that builds it."""
    mma = next(line for line in schedule.splitlines() if "nvgpu.mma.sync" in line)
    name = mma.split("(")[1].split(")")[0].split(", ")[operand]
    build = next(line for line in schedule.splitlines() if line.strip().startswith(f"{name} = "))
    return name, build


@pytest.mark.parametrize("operand", [0, 1])
def test_swapped_fragment_registers_give_a_wrong_answer(kernels, tmp_path: Path, operand) -> None:
    """Swap two registers of the A (or B) fragment a lane hands the MMA: the emulator puts
    each where the ISA says, so the product is wrong (the original, rebuilt, is right)."""
    exe = kernels[(16, 8)]
    schedule = (exe.directory / "gpu.mlir").read_text()
    _, build = _mma_operands(schedule, operand)
    elements = build.split("vector.from_elements ")[1].split(" :")[0].split(", ")
    swapped = [elements[1], elements[0], *elements[2:]]
    mutated = schedule.replace(build, build.replace(", ".join(elements), ", ".join(swapped)))
    assert mutated != schedule
    a = _block_matrix(40, 24, 16, 8, 0.7, 11)
    b = np.random.default_rng(11).standard_normal((24, 16)).astype(np.float32)
    t = SparseTensor.from_scipy(a, "bsr:16x8")
    want = _tf32(a.toarray()) @ _tf32(b)
    np.testing.assert_allclose(rebuild(schedule, exe, tmp_path / "same")(t, b), want,
                               rtol=1e-5, atol=1e-4)  # fmt: skip
    wrong = rebuild(mutated, exe, tmp_path / "swapped")(t, b)
    assert not np.allclose(wrong, want, rtol=1e-3, atol=1e-3)


def _f16_program(r: int, c: int) -> str:
    """BSR f16 x dense f16 with an f32 result (f32 accumulation)."""
    text = OURS.format(r=r, c=c)
    for f32, f16 in (("tensor<?x?xf32, #bsr>", "tensor<?x?xf16, #bsr>"),
                     ("%B: tensor<?x?xf32>", "%B: tensor<?x?xf16>"),
                     ("#bsr>, tensor<?x?xf32>)", "#bsr>, tensor<?x?xf16>)"),
                     ("%B, %c1 : tensor<?x?xf32>", "%B, %c1 : tensor<?x?xf16>")):  # fmt: skip
        text = text.replace(f32, f16)
    return text


def test_f16_blocks_run_m16n8k16() -> None:
    """f16 operands, f32 accumulation: exact products, so f32 rounding is all the error."""
    program = _f16_program(16, 32)
    exe = sparsecomp.compile(program, "cuda-emu:sm_90")
    assert "mmaShape = [16, 8, 16]" in (exe.directory / "gpu.mlir").read_text()
    rng = np.random.default_rng(5)
    a = _block_matrix(45, 70, 16, 32, 0.5, 5).toarray().astype(np.float16)
    b = rng.standard_normal((70, 12)).astype(np.float16)
    got = exe(SparseTensor.from_dense(a, "bsr:16x32"), b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    (text,) = [t for t in cuda.ptx(program, "cuda:sm_80").values() if "mma.sync" in t]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text
    assert cuda.assemble(text, "sm_80")


def test_profile_counts_warp_mmas() -> None:
    """3 stored 16x8 blocks, one k slice each, 4 column groups per warp: 12 warp MMAs of
    16 * 8 * 8 multiply-adds; the roofline's tensor-core time is their flops at peak."""
    exe = sparsecomp.compile(OURS.format(r=16, c=8), "cuda-emu:sm_80", profile=True)
    dense = np.zeros((32, 24), np.float32)
    dense[0:16, 0:8] = 1.0
    dense[0:16, 16:24] = 2.0
    dense[16:32, 8:16] = 3.0
    b = np.ones((24, 8), np.float32)
    p = exe.profile(SparseTensor.from_dense(dense, "bsr:16x8"), b)
    np.testing.assert_allclose(p.result, dense @ b)
    assert p.mma_instructions == {2: 12}
    assert p.mma_flops == {2: 12 * 2 * 16 * 8 * 8}
    assert p.h100_tensor_seconds == pytest.approx(12 * 2 * 16 * 8 * 8 / 494.7e12)
    assert p.h100_seconds == max(p.h100_bandwidth_seconds, p.h100_tensor_seconds)
    assert "MMA tf32: 12 warp instructions" in str(p)


TRANSPOSED_B = OURS.replace(
    "linalg.matmul ins",
    "linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
    "affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins",
).replace("%n = tensor.dim %B, %c1", "%n = tensor.dim %B, %c0")


@pytest.mark.parametrize("which", ["transposed_b", "bsr_plus_csr"])
def test_a_block_product_off_the_tensor_cores_is_remarked(which: str) -> None:
    """A BSR A @ B^T, and bsr+csr's BSR part, took the scalar schedule unremarked."""
    if which == "transposed_b":
        source = TRANSPOSED_B.format(r=16, c=8)
        why = "its indexing maps are not C[m, n] += A[m, k] * B[k, n]"
    else:
        composable = parse_layout("bsr+csr:16x8").attr_text()
        source = re.sub(r"#bsr = .*?crdWidth = 32}>", lambda _: f"#bsr = {composable}",
                        OURS.format(r=16, c=8), count=1, flags=re.DOTALL)  # fmt: skip
        why = "a composable operand's parts are multiplied part by part"
    exe = sparsecomp.compile(source, "cuda-emu:sm_80")
    assert any(f"this product takes the scalar schedule: {why}" in r for r in exe.remarks)
    rng = np.random.default_rng(3)
    a = _block_matrix(32, 24, 16, 8, 0.5, 3)
    b = rng.standard_normal((9, 24) if which == "transposed_b" else (24, 9)).astype(np.float32)
    want = a.toarray() @ (b.T if which == "transposed_b" else b)
    np.testing.assert_allclose(exe(a, b), want, rtol=1e-5, atol=1e-5)


def test_sm_75_keeps_f32_products_off_tf32_tensor_cores() -> None:
    """sm_75's m16n8k8 takes f16 only: f32 BSR products were put on tf32 MMAs there,
    which ptxas refuses ("Feature '.tf32' requires .target sm_80"). They now run on
    the plain schedule, in float32."""
    kernels = cuda.ptx(OURS.format(r=16, c=8), "cuda:sm_75")
    assert not any("mma.sync" in t or "tf32" in t for t in kernels.values())
    for ptx in kernels.values():
        assert cuda.assemble(ptx, "sm_75")
    exe = sparsecomp.compile(OURS.format(r=16, c=8), "cuda-emu:sm_75")
    a = _block_matrix(40, 24, 16, 8, 0.5, 7)
    b = np.random.default_rng(7).standard_normal((24, 9)).astype(np.float32)
    got = exe(SparseTensor.from_scipy(a, "bsr:16x8"), b)
    np.testing.assert_allclose(got, a.toarray() @ b, rtol=1e-5, atol=1e-5)


def test_a_static_width_variant_that_would_leave_the_gpu_is_not_taken(caplog) -> None:
    """A BSR 16x8 product in f64 takes the scalar schedule; its variant for a static K
    mapped no loop to the GPU (a partial block's types): the call runs the dynamic
    kernel, which launches, rather than that variant (it ran all in host code)."""
    import logging

    src = """
#s = #sparse_iter.sparsity<block[16, 8]>
func.func @spmm(%A: tensor<?x?xf64, #s>, %B: tensor<?x?xf64>,
                %C: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #s>, tensor<?x?xf64>)
                     outs(%C : tensor<?x?xf64>) -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}
"""
    exe = sparsecomp.compile(src, "cuda-emu:sm_80")
    assert "gpu.launch" in (exe.directory / "gpu.mlir").read_text()
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (32, 16)) * np.kron(rng.random((2, 2)) < 0.7, np.ones((16, 8)))
    b = rng.uniform(-1, 1, (16, 8))
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        got = exe(SparseTensor.from_dense(a, "bsr:16x8"), b, np.zeros((32, 8)))
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    said = [r.getMessage() for r in caplog.records if "no variant for the sizes" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert "its loops would stay in host code" in said[0]
