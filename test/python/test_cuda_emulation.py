"""The cuda-emu targets: the CUDA schedule of each kernel, run block by block on the CPU.

Every kernel is compiled to the GPU schedule (one row per thread, 128
threads per block, a guard for the last block) and checked against scipy on
shapes that are not multiples of the block, with empty rows and power-law
rows, so that a wrong id mapping or guard gives a wrong answer here.
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
from sparsecomp.errors import CompileError, SparsecompError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module", params=["sm_80", "sm_90"])
def kernels(request) -> dict[str, sparsecomp.Executable]:
    target = f"cuda-emu:{request.param}"
    return {
        n: sparsecomp.compile(EXAMPLES / f"{n}.mlir", target) for n in ("spmv", "spmm", "sddmm")
    }


def _matrix(rows: int, cols: int, density: float, power_law: bool, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    if power_law and rows and cols:
        # Row lengths ~ Zipf: a few long rows, many empty or short ones.
        lengths = np.minimum(rng.zipf(1.6, rows) - 1, cols)
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        indices = np.concatenate([rng.choice(cols, n, replace=False) for n in lengths] or [[]])
        data = rng.standard_normal(int(indptr[-1])).astype(np.float32)
        return sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=(rows, cols))
    return sp.random(rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32)


@settings(deadline=None, max_examples=30)
@given(
    rows=st.sampled_from([0, 1, 5, 127, 128, 129, 300]),
    cols=st.integers(0, 40),
    density=st.floats(0, 0.3),
    power_law=st.booleans(),
    seed=st.integers(0, 1000),
    k=st.sampled_from([1, 4, 13, 40]),  # SDDMM's dot products: 8 lanes each
)
def test_kernels_match_scipy(kernels, rows, cols, density, power_law, seed, k) -> None:
    a = _matrix(rows, cols, density, power_law, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(cols).astype(np.float32)
    np.testing.assert_allclose(kernels["spmv"](a, x), a @ x, rtol=1e-4, atol=1e-4)
    b = rng.standard_normal((cols, 3)).astype(np.float32)
    np.testing.assert_allclose(kernels["spmm"](a, b), a @ b, rtol=1e-4, atol=1e-4)
    xs = rng.standard_normal((rows, k)).astype(np.float32)
    ys = rng.standard_normal((cols, k)).astype(np.float32)
    got = kernels["sddmm"](a, xs, ys).to_scipy().toarray()
    want = a.multiply(xs @ ys.T).toarray()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_schedule_is_the_gpu_one(kernels) -> None:
    """The emulated IR is a gpu.launch, not the CPU's loops: SpMV's rows on 8 lanes each
    (16 rows per block, shuffles add the lanes' sums), SDDMM's rows on a warp each (4 per
    block; 4 entries at a time, 8 lanes split each entry's dot product, shuffles add it
    up), SpMM's output columns on the 32 lanes of a warp times 4 rows; SpMM's warps
    stage their row's entries in shared memory, 32 at a time (SDDMM's groups load
    their 4 consecutive entries in one request)."""
    shapes = {"spmv": ("%c8", "%c16"), "sddmm": ("%c32", "%c4"), "spmm": ("%c32", "%c4")}
    for name, exe in kernels.items():
        gpu = (exe.directory / "gpu.mlir").read_text()
        # one launch each: SDDMM's output values start from zero in registers (no fill)
        assert gpu.count("gpu.launch blocks") == 1
        assert "linalg.fill" not in gpu
        x, y = shapes[name]
        assert re.search(rf"threads\(.*\) in \(%\w+ = {x}, %\w+ = {y}, %\w+ = %c1\)", gpu), name
        assert ("gpu.shuffle" in gpu) == (name in ("spmv", "sddmm"))
        staged = "nvvm.bar.warp.sync" in gpu and "#gpu.address_space<workgroup>" in gpu
        assert staged == (name == "spmm"), name
        if name == "sddmm":  # groups of 8 lanes: a butterfly of 3 rounds
            assert len(re.findall(r"gpu.shuffle\s+xor", gpu)) == 3, gpu
        assert exe.manifest["remarks"] == [], name  # every loop runs as a launch
        llvm = (exe.directory / "llvm.mlir").read_text()
        assert "omp.parallel" not in llvm
        assert "gpu.launch" not in llvm


def test_bad_targets_and_unsupported_programs() -> None:
    with pytest.raises(SparsecompError, match=r"expected cuda-emu:sm_XY \(sm_70, .*sm_90\)"):
        sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:80")
    with pytest.raises(SparsecompError, match="unknown sm version 12"):
        sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_12")
    older = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_75")  # no 2:4 shapes
    a = sp.random(9, 4, density=0.5, format="csr", random_state=3, dtype=np.float32)
    np.testing.assert_allclose(older(a, np.ones(4, np.float32)), a @ np.ones(4), rtol=1e-5)
    named = (EXAMPLES / "spmv.mlir").read_text().replace(
        "func.func @spmv",
        "module attributes {sparse_iter.targets = {c = #sparse_iter.cpu<x86_64, features = [], "
        "vector_bits = 0, threads = 1>}} {\nfunc.func @spmv",
    ) + "}\n"
    with pytest.raises(
        CompileError, match=r"cuda-emu:sm_80 compiles modules without sparse_iter\.targets"
    ):
        sparsecomp.compile(named, "cuda-emu:sm_80")
    upstream = """
#COO = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
func.func @conv(%a: tensor<4x6xf64, #COO>) -> tensor<4x6xf64, #DCSR> {
  %0 = sparse_tensor.convert %a : tensor<4x6xf64, #COO> to tensor<4x6xf64, #DCSR>
  return %0 : tensor<4x6xf64, #DCSR>
}"""
    with pytest.raises(
        CompileError, match=r"need MLIR's sparsifier, which has no GPU schedule: 'conv'"
    ):
        sparsecomp.compile(upstream, "cuda-emu:sm_80")


def test_a_wrong_schedule_gives_a_wrong_answer(tmp_path) -> None:
    """The emulator runs the schedule it is given: break the row mapping or the grid and
    the answer is wrong (the original schedule, rebuilt the same way, is right)."""
    exe = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_80")
    schedule = (exe.directory / "gpu.mlir").read_text()
    launch = re.search(r"gpu\.launch blocks\((%\w+), .*? threads\((%\w+), ", schedule)
    assert launch is not None
    block, thread = launch.groups()
    a = _matrix(300, 20, 0.3, False, 7)
    x = np.random.default_rng(7).standard_normal(20).astype(np.float32)
    same = rebuild(schedule, exe, tmp_path / "same")
    np.testing.assert_allclose(same(a, x), a @ x, rtol=1e-4, atol=1e-4)
    # Rows from the block id instead of the thread id: threads of a block collide.
    swapped = schedule.replace(f", {thread} : index", f", {block} : index", 1)
    assert swapped != schedule
    wrong = rebuild(swapped, exe, tmp_path / "swapped")(a, x)
    assert not np.allclose(wrong, a @ x, rtol=1e-4, atol=1e-4)
    # A grid rounded down: the last, partial block of rows never runs.
    short = schedule.replace("arith.ceildivsi", "arith.divsi")
    assert short != schedule
    wrong = rebuild(short, exe, tmp_path / "short")(a, x)
    assert not np.allclose(wrong[256:], (a @ x)[256:], rtol=1e-4, atol=1e-4)


def _hyb_program(layout: str, op: str) -> str:
    from sparsecomp.formats import parse_layout

    attr = parse_layout(layout).attr_text()
    if op == "spmv":
        return f"""
func.func @f(%A: tensor<?x?xf32, {attr}>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {{
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, {attr}>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}"""
    return f"""
func.func @f(%A: tensor<?x?xf32, {attr}>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, {attr}>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}"""


COMPOSABLE = ["hyb", "hyb:1:8", "hyb:2:8", "bsr+csr:4x4"]


@pytest.fixture(scope="module")
def composable_kernels() -> dict[tuple[str, str], sparsecomp.Executable]:
    return {
        (layout, op): sparsecomp.compile(_hyb_program(layout, op), "cuda-emu:sm_80")
        for layout in COMPOSABLE
        for op in ("spmv", "spmm")
    }


@settings(deadline=None, max_examples=25)
@given(
    layout=st.sampled_from(COMPOSABLE),
    rows=st.sampled_from([0, 1, 33, 129, 300]),
    cols=st.integers(0, 80),
    density=st.floats(0, 0.3),
    power_law=st.booleans(),
    huge_row=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_composable_layouts_on_the_gpu_schedule(
    composable_kernels, layout, rows, cols, density, power_law, huge_row, seed
) -> None:
    """Parts in one launch (atomic adds where they share rows), ELL buckets with a lane per
    slot, hyb's rest on a warp per row (its rows are longer than the widest bucket), SpMM
    parts with their columns on lanes: still scipy's answer."""
    a = _matrix(rows, cols, density, power_law, seed).tolil()
    if huge_row and rows and cols:
        a[rows // 2, :] = 1.5  # one row with every column: the rest's long row
    a = a.tocsr().astype(np.float32)
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal(rows, dtype=np.float32)
    got = composable_kernels[(layout, "spmv")](a, x, y)
    np.testing.assert_allclose(got, y + a @ x, rtol=1e-4, atol=1e-3)
    b = rng.standard_normal((cols, 5), dtype=np.float32)
    c = rng.standard_normal((rows, 5), dtype=np.float32)
    got = composable_kernels[(layout, "spmm")](a, b, c)
    np.testing.assert_allclose(got, c + a @ b, rtol=1e-4, atol=1e-3)


def test_hyb_rest_rows_share_a_warp_in_one_launch() -> None:
    """The rest of hyb holds rows longer than 32 entries: 32 lanes per row (a butterfly from
    16). The buckets' rows are disjoint: they run in one launch without atomics. The rest's
    dense rows cover every row, so it adds atomically, in a launch of its own; hyb:2:8's
    column partitions share rows: one launch, adding atomically."""
    exe = sparsecomp.compile(_hyb_program("hyb", "spmv"), "cuda-emu:sm_80")
    schedule = (exe.directory / "gpu.mlir").read_text()
    assert schedule.count("gpu.launch blocks") == 2
    assert re.search(r"gpu.shuffle  xor %\w+, %c16_i32", schedule)
    assert "sparse_iter.min_row_entries = 33" in (exe.directory / "loops.mlir").read_text()
    assert schedule.count("memref.atomic_rmw") == 1  # the rest's row sum
    split = sparsecomp.compile(_hyb_program("hyb:2:8", "spmv"), "cuda-emu:sm_80")
    split_schedule = (split.directory / "gpu.mlir").read_text()
    assert split_schedule.count("gpu.launch blocks") == 1
    assert "memref.atomic_rmw" in split_schedule


@pytest.mark.parametrize("layout", COMPOSABLE)
@pytest.mark.parametrize("op", ["spmv", "spmm"])
def test_composable_parts_do_not_race(layout: str, op: str) -> None:
    """No address is written by one block and touched by another in the same launch: on a
    GPU, where blocks run in any order, the result is the emulator's. (hyb's rest, which
    covers every row, once rewrote the buckets' rows from the same launch: right here,
    wrong on an H100.)"""
    exe = sparsecomp.compile(_hyb_program(layout, op), "cuda-emu:sm_80", profile=True)
    a = _matrix(300, 80, 0.1, True, 3).tolil()
    a[7, :] = 1.5  # a row for the rest
    a = a.tocsr().astype(np.float32)
    rng = np.random.default_rng(0)
    dense = (80,) if op == "spmv" else (80, 5)
    b = rng.standard_normal(dense, dtype=np.float32)
    c = rng.standard_normal((300, *dense[1:]), dtype=np.float32)
    prof = exe.profile(a, b, c)
    np.testing.assert_allclose(prof.result, c + a @ b, rtol=1e-4, atol=1e-3)
    assert prof.races == 0, str(prof)
