"""Tensor cores with f16 accumulators: f16 x f16 products with an f16 result (issue 41).

A product whose inputs and ``outs`` are all f16 sums in f16, so it runs on
the MMAs' f16 accumulator (``mma.sync``/``mma.sp`` ``.f16.f16.f16.f16``)
instead of the scalar schedule it took before. The emulator rounds each
MMA's sum to f16, as the accumulator register holds it; the reference does
the same per k tile of 16, in the kernels' order (ascending k), so the two
agree to an f16 rounding of each tile's partial sum, and both stay within
f16's precision of the exact product.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from long_runs import strength
from mma_reference import PRODUCT
from sparsecomp.compiler import cuda
from sparsecomp.formats import SparseTensor
from sparsecomp.sparsify import sparsify

#: sparsity -> (layout of the operand, the instruction the PTX must hold)
FORMS = {
    "block[16, 16]": ("bsr:16x16", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
    "nm[2, 4]": ("nm:2:4", "mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
}


@pytest.fixture(scope="module")
def kernels() -> dict[str, sparsecomp.Executable]:
    return {
        s: sparsecomp.compile(PRODUCT.format(sparsity=s, el="f16", acc="f16"), "cuda-emu:sm_90")
        for s in FORMS
    }


def _operand(sparsity: str, m: int, k: int, rng: np.random.Generator) -> np.ndarray:
    dense = rng.standard_normal((m, k)).astype(np.float16)
    if sparsity == "nm[2, 4]":
        return sparsify(dense, "nm:2:4")
    keep = rng.random((-(-m // 16), -(-k // 16))) < 0.5
    return dense * np.kron(keep, np.ones((16, 16), np.float16))[:m, :k]


def _per_k_tile(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``c + a b`` summed exactly per k tile of 16 and rounded to f16 after each, and
    the sum of one f16 ulp of each rounded partial sum (what a rounding that differs
    by an ulp at each tile may add up to)."""
    out = c.astype(np.float16)
    ulps = np.zeros(out.shape)
    for k0 in range(0, a.shape[1], 16):
        tile = a[:, k0 : k0 + 16].astype(np.float64) @ b[k0 : k0 + 16].astype(np.float64)
        out = (out.astype(np.float64) + tile).astype(np.float16)
        ulps += np.spacing(np.abs(out)).astype(np.float64)
    return out, ulps


@settings(deadline=None, max_examples=strength(12, 40))
@given(
    sparsity=st.sampled_from(sorted(FORMS)),
    m=st.integers(1, 50),
    k=st.integers(1, 70),
    n=st.sampled_from([1, 8, 13, 40]),
    seed=st.integers(0, 1000),
)
def test_f16_accumulation_matches_a_per_tile_f16_reference(kernels, sparsity, m, k, n,
                                                           seed) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    a = _operand(sparsity, m, k, rng)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float16)
    got = kernels[sparsity](SparseTensor.from_dense(a, FORMS[sparsity][0]), b, c)
    assert got.dtype == np.float16
    assert got.shape == (m, n)
    want, ulps = _per_k_tile(a, b, c)
    want = want.astype(np.float64)
    # An MMA adds its 16 products and the accumulator in f32 before rounding that to
    # f16 (the reference rounds the exact sum): each tile's partial sum may then round
    # an ulp the other way, and the difference carries to the end, where it can be many
    # ulps of a result that cancels; and a sum that cancels near zero keeps the f32
    # rounding. Both are far below a tile summed twice, dropped or misread.
    within_f32 = 2.0**-20 * (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(c))
    assert np.all(np.abs(got - want) <= ulps + within_f32), np.abs(got - want).max()
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    tiles = -(-k // 16) + 1
    bound = tiles * 2**-10 * (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(c))
    assert np.all(np.abs(got - exact) <= bound + 1e-6)


@pytest.mark.parametrize("sparsity", sorted(FORMS))
def test_f16_results_run_on_tensor_cores_and_assemble(kernels, sparsity) -> None:
    gpu = (kernels[sparsity].directory / "gpu.mlir").read_text()
    assert "-> vector<2x2xf16>" in gpu
    assert not any("scalar schedule" in r for r in kernels[sparsity].manifest.get("remarks", []))
    program = PRODUCT.format(sparsity=sparsity, el="f16", acc="f16")
    for chip in ("sm_80", "sm_90"):
        (text,) = [t for t in cuda.ptx(program, f"cuda:{chip}").values() if "mma" in t]
        assert FORMS[sparsity][1] in text
        assert cuda.assemble(text, chip)


def test_f32_inputs_with_an_f16_result_say_why_they_stay_scalar() -> None:
    """``linalg.matmul`` with f32 inputs and an f16 result casts its inputs to f16 before it
    multiplies (linalg's semantics): a body the tensorizer does not take. The product keeps
    the scalar schedule with a remark that says so, and still gives the right answer."""
    program = """
    #s = #sparse_iter.sparsity<block[16, 8]>
    func.func @spmm(%A: tensor<?x?xf32, #s>, %B: tensor<?x?xf32>,
                    %C: tensor<?x?xf16>) -> tensor<?x?xf16> {
      %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #s>, tensor<?x?xf32>)
                         outs(%C : tensor<?x?xf16>) -> tensor<?x?xf16>
      return %r : tensor<?x?xf16>
    }
    """
    exe = sparsecomp.compile(program, "cuda-emu:sm_90")
    said = " ".join(exe.manifest.get("remarks", []))
    assert "its body is not out + a * b of its operands" in said
    assert "arith.truncf" in said
    rng = np.random.default_rng(2)
    a = _operand("block[16, 16]", 32, 24, rng).astype(np.float32)
    b = rng.standard_normal((24, 5)).astype(np.float32)
    c = np.zeros((32, 5), np.float16)
    got = exe(SparseTensor.from_dense(a, "bsr:16x8"), b, c)
    np.testing.assert_allclose(got, a @ b, rtol=2e-2, atol=2e-2)
