"""Choosing layouts: statistics, the cost model's features, choose(), calibration's fit,
and prepared operands (exe.prepare) against scipy."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import cpu_kernels
import sparsecomp
from sparsecomp.errors import SparsecompError
from sparsecomp.formats import SparseTensor, parse_layout
from sparsecomp.formats.choice import MARGIN, candidates, choose, features, predict, predicted
from sparsecomp.formats.programs import program
from sparsecomp.formats.stats import BLOCK_SIZES, matrix_stats
from sparsecomp.tools.calibrate import fit

pytestmark = pytest.mark.usefixtures("private_cache")


def power_law(rows: int, cols: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    lengths = np.minimum(cols, rng.zipf(1.6, rows) - 1)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([rng.choice(cols, n, replace=False) for n in lengths] or [[]])
    data = rng.standard_normal(int(indptr[-1])).astype(np.float32)
    m = sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=(rows, cols))
    m.sort_indices()
    return m


def blocky(n: int, size: int, seed: int) -> sp.csr_matrix:
    """Full ``size x size`` blocks on a few block positions."""
    rng = np.random.default_rng(seed)
    grid = n // size
    mask = np.kron(rng.random((grid, grid)) < 0.1, np.ones((size, size)))
    return sp.csr_matrix(mask * rng.standard_normal((n, n)), dtype=np.float32)


matrices = st.builds(
    lambda rows, cols, density, seed: sp.random(
        rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32
    ),
    st.integers(0, 70),
    st.integers(0, 70),
    st.floats(0, 0.6),
    st.integers(0, 1000),
)


@given(a=matrices)
@settings(max_examples=40, deadline=None)
def test_statistics_are_exact_on_small_matrices(a: sp.csr_matrix) -> None:
    """Below the sample size every statistic is exact: compared with brute force."""
    stats = matrix_stats(a)
    lengths = np.diff(a.indptr)
    assert stats.nnz == a.nnz
    assert stats.shape == a.shape
    assert stats.max_row == (lengths.max() if a.shape[0] else 0)
    for lo, hi in [(0, 1), (1, 4), (3, 70)]:
        inside = (lengths > lo) & (lengths <= hi)
        assert stats.rows_between(lo, hi) == (inside.sum(), lengths[inside].sum())
    coo = a.tocoo()
    for size in BLOCK_SIZES:
        keys = set(zip(coo.row // size, coo.col // size, strict=True))
        assert stats.blocks[size].blocks == len(keys)
        counts: dict[tuple[int, int], int] = {}
        for key in zip(coo.row // size, coo.col // size, strict=True):
            counts[key] = counts.get(key, 0) + 1
        dense = [c for c in counts.values() if c >= max(1, size * size // 4)]
        assert stats.blocks[size].dense_blocks == len(dense)
        assert stats.blocks[size].dense_entries == sum(dense)
    groups = set(zip(coo.row // 16, coo.col, strict=True))
    assert stats.column_reuse_miss == (len(groups) / a.nnz if a.nnz else 1.0)
    for keep, group in stats.nm:
        per_group: dict[tuple[int, int], int] = {}
        for key in zip(coo.row, coo.col // group, strict=True):
            per_group[key] = per_group.get(key, 0) + 1
        assert max(per_group.values(), default=0) <= keep


def test_nm_is_found_where_it_holds() -> None:
    rng = np.random.default_rng(0)
    d = rng.standard_normal((64, 64)).astype(np.float32)
    d[:, 1::4] = 0
    d[:, 2::4] = 0
    assert (2, 4) in matrix_stats(sp.csr_matrix(d)).nm
    d[5, 1] = 1.0  # three in one group of row 5
    assert (2, 4) not in matrix_stats(sp.csr_matrix(d)).nm


def test_sampled_block_counts_scale_to_the_whole() -> None:
    """Above the sample size, block counts are estimated within a few percent."""
    a = blocky(2048, 8, seed=3)
    assert a.nnz > 200_000
    stats = matrix_stats(a)
    exact = len(set(zip(a.tocoo().row // 8, a.tocoo().col // 8, strict=True)))
    assert abs(stats.blocks[8].blocks / exact - 1) < 0.1


@pytest.mark.parametrize("layout", ["hyb:1:8", "hyb:1:32", "bsr:4x4", "ell", "bsr+csr:4x4"])
def test_features_count_what_packing_stores(layout: str) -> None:
    """The model's slots, entries and blocks are what SparseTensor.from_scipy stores."""
    a = power_law(300, 200, seed=1) if "hyb" in layout or layout == "ell" else blocky(96, 4, 2)
    found = features(layout, matrix_stats(a))
    t = SparseTensor.from_scipy(a, layout)
    if layout.startswith("hyb"):
        ell = [p for p, part in zip(t.parts, t.layout.parts, strict=True) if part.rule != "rest"]
        assert _total(found, "ell.slots") == sum(p.nse for p in ell)
        assert _total(found, "csr.entries") == t.parts[-1].nse
        assert found["parts"] == 1 + sum(1 for p in ell if p.nse)
    elif layout == "ell":
        assert _total(found, "ell.slots") == t.nse
    elif layout == "bsr:4x4":
        assert found["bsr4.values"] == t.nse
    else:
        assert found["bsr4.values"] == t.parts[0].nse
        assert _total(found, "csr.entries") == t.parts[1].nse


def _total(found: dict[str, float], prefix: str) -> float:
    """A feature summed over its row-length classes."""
    return sum(v for name, v in found.items() if name.startswith(prefix + "."))


def test_gather_misses_count_the_csr_rest_of_bsr_csr() -> None:
    """``bsr+csr``'s gathered rows that miss the cache are its blocks' and its CSR
    rest's (the rest once counted none: the model took a graph's ``bsr+csr:4x4`` for
    2x CSR's speed). A random matrix has no dense blocks: its rest is all of it."""
    a = sp.random(20000, 20000, density=0.001, format="csr", random_state=0)
    stats = matrix_stats(a)
    csr = features("csr", stats, 64)["gather.miss"]
    assert csr > 0  # the dense operand does not fit the cache
    assert features("bsr+csr:4x4", stats, 64)["gather.miss"] >= 0.9 * csr


def test_row_length_classes() -> None:
    """CSR entries and ELL slots are counted by the class of their row's length."""
    a = sp.csr_matrix(np.tril(np.ones((40, 40), np.float32)))  # rows of 1 .. 40
    found = features("csr", matrix_stats(a))
    assert found["csr.entries.short"] == 1 + 2 + 3 + 4
    assert found["csr.entries.mid"] == sum(range(5, 33))
    assert found["csr.entries.long"] == sum(range(33, 41))
    hyb = features("hyb:1:8", matrix_stats(a))
    assert hyb["ell.slots.short"] == 1 + 2 + 4 * 2
    assert hyb["ell.slots.mid"] == 8 * 4
    assert hyb["csr.entries.mid"] == sum(range(9, 33))
    assert hyb["csr.entries.long"] == sum(range(33, 41))
    assert features("ell", matrix_stats(a))["ell.slots.long"] == 40 * 40


def _coefficients(bsr_speedup: float) -> dict[str, dict[str, list[float]]]:
    """A model in which BSR 4x4's values cost ``1 / bsr_speedup`` of CSR's entries."""
    csr = {f"csr.entries.{c}": [1e-9, 0.0] for c in ("short", "mid", "long")}
    table = {"call": [0.0, 0.0], **csr, "csr.rows": [0.0, 0.0],
             "bsr4.values": [1e-9 / bsr_speedup, 0.0], "bsr4.blocks": [0.0, 0.0]}  # fmt: skip
    return {"spmm": table, "spmv": table, "sddmm": table}


def test_choose_keeps_csr_unless_clearly_faster() -> None:
    a = blocky(256, 4, seed=5)  # full 4x4 blocks: BSR stores exactly the nonzeros
    near = choose(a, "spmm", 32, coefficients=_coefficients(1 / (1 - MARGIN / 2)))
    assert near.layout == "csr"
    assert "bsr:4x4" in near.why
    far = choose(a, "spmm", 32, coefficients=_coefficients(2.0))
    assert far.layout == "bsr:4x4"
    assert far.estimates["csr"] == pytest.approx(2 * far.estimates["bsr:4x4"])
    assert list(far.estimates.values()) == sorted(far.estimates.values())
    assert set(far.estimates) == set(candidates(matrix_stats(a), "spmm"))
    assert "2.00x faster than CSR" in far.why
    assert far.seconds > 0


def test_choose_refuses_what_it_cannot_model() -> None:
    a = sp.eye(4, format="csr")
    with pytest.raises(SparsecompError, match="knows spmm, spmv and sddmm"):
        choose(a, "spgemm")
    with pytest.raises(SparsecompError, match="cost models for 'host' and 'cuda:sm_XX'"):
        choose(a, "spmm", target="x86")
    assert choose(sp.csr_matrix((5, 5)), "spmv").layout == "csr"  # empty: nothing else applies


def test_fit_recovers_known_coefficients() -> None:
    """Times made from known coefficients are fitted back (the calibration's solver)."""
    csr = {
        f"csr.entries.{c}": [1e-9 * (i + 1), 2e-10] for i, c in enumerate(("short", "mid", "long"))
    }
    truth = {"call": [2e-6, 0.0], **csr, "csr.rows": [3e-9, 0.0],
             "bsr4.values": [2e-10, 5e-11], "bsr4.blocks": [1e-9, 1e-10]}  # fmt: skip
    records = []
    for seed in range(6):
        a = blocky(128, 4, seed) + power_law(128, 128, seed)
        stats = matrix_stats(sp.csr_matrix(a))
        for layout in ("csr", "bsr:4x4"):
            for k in (32, 128):
                seconds = predict(layout, stats, "spmm", k, {"spmm": truth})
                record = {"op": "spmm", "k": k, "matrix": str(seed), "layout": layout}
                records.append(
                    {**record, "seconds": seconds, "features": features(layout, stats, k)}
                )
    fitted = fit(records)["spmm"]
    for r in records:
        assert predicted(fitted, r["features"], r["k"]) == pytest.approx(r["seconds"], rel=0.02)


@pytest.mark.parametrize("layout", [None, "hyb:1:8", "bsr:4x4", "ell", "csr"])
def test_prepared_operands_match_scipy(
    layout: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(1)
    a = power_law(90, 70, seed=2)
    b = rng.standard_normal((70, 5)).astype(np.float32)
    x = rng.standard_normal(70).astype(np.float32)
    spmm = sparsecomp.compile(program("spmm", "csr"))
    spmv = sparsecomp.compile(program("spmv", "csr"))
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        prepared = spmm.prepare(a, layout=layout, k=5)
    assert (prepared.choice is None) == (layout is not None)
    assert ("sparsecomp: spmm(spmm)" in caplog.text) == (layout is None)
    assert str(prepared.tensor.layout) == prepared.layout
    np.testing.assert_allclose(spmm(prepared, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(spmm(prepared, 2 * b), a @ (2 * b), rtol=1e-4, atol=1e-4)
    vector = spmv.prepare(a, layout=layout)
    np.testing.assert_allclose(spmv(vector, x), a @ x, rtol=1e-4, atol=1e-4)
    with pytest.raises(SparsecompError, match="operand prepared for 'spmm'"):
        spmv(prepared, x)


@pytest.mark.parametrize("layout", ["bsr:2x2", "ell"])
def test_prepared_sddmm_keeps_its_layout(layout: str) -> None:
    rng = np.random.default_rng(3)
    s = power_law(40, 30, seed=4)
    xs = rng.standard_normal((40, 6)).astype(np.float32)
    ys = rng.standard_normal((30, 6)).astype(np.float32)
    exe = sparsecomp.compile(program("sddmm", "csr"))
    got = exe(exe.prepare(s, layout=layout), xs, ys)
    assert str(got.layout) == layout
    np.testing.assert_allclose(got.to_dense(), s.multiply(xs @ ys.T).toarray(), atol=1e-4)


def test_prepare_on_a_loaded_executable(tmp_path) -> None:
    a = power_law(30, 20, seed=5)
    b = np.ones((20, 3), np.float32)
    exe = sparsecomp.load(sparsecomp.compile(program("spmm", "csr")).save(tmp_path / "k"))
    np.testing.assert_allclose(exe(exe.prepare(a, layout="csr"), b), a @ b, rtol=1e-5)
    with pytest.raises(SparsecompError, match="cannot compile 'spmm' for layout bsr:2x2"):
        exe.prepare(a, layout="bsr:2x2")


def test_prepare_needs_one_sparse_matrix() -> None:
    csr = "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>"
    two = sparsecomp.compile(f"""
func.func @add(%a: tensor<?x?xf32, {csr}>, %b: tensor<?x?xf32, {csr}>) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32, {csr}>
  %n = tensor.dim %a, %c1 : tensor<?x?xf32, {csr}>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %r = linalg.add ins(%a, %b : tensor<?x?xf32, {csr}>, tensor<?x?xf32, {csr}>)
                  outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
""")
    with pytest.raises(SparsecompError, match="one sparse matrix argument"):
        two.prepare(sp.eye(3, format="csr"))
    with pytest.raises(SparsecompError, match=r"scipy\.sparse matrix or a SparseTensor"):
        sparsecomp.compile(program("spmv", "csr")).prepare(np.eye(3))


@pytest.mark.parametrize("rule", ['"hyb:1:4"', '"bsr+csr:4x4"', '"bsr:2x2"'])
def test_a_rule_in_the_program(rule: str) -> None:
    """``sparse_iter.decompose`` on an argument: the function takes the rule's parts
    (scipy input packed into them at the call) and still computes A @ B."""
    exe = sparsecomp.compile(f"""
#sparse = #sparse_iter.sparsity<unstructured>
func.func @spmm(%A: tensor<?x?xf32, #sparse> {{sparse_iter.decompose = {rule}}},
                %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #sparse>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
""")
    wanted = parse_layout(rule.strip('"')).attr_text()
    assert parse_layout(exe.spmm.signature.args[0].layout).attr_text() == wanted
    rng = np.random.default_rng(7)
    a = power_law(50, 40, seed=8)
    b = rng.standard_normal((40, 6)).astype(np.float32)
    c = rng.standard_normal((50, 6)).astype(np.float32)
    np.testing.assert_allclose(exe(a, b, c), c + a @ b, rtol=1e-4, atol=1e-4)


def test_compile_explain(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """``sparsecomp-compile --explain A.npz`` prints the choice and builds that variant."""
    from sparsecomp.tools.compile import main

    a = blocky(128, 8, seed=9)
    sp.save_npz(tmp_path / "a.npz", a)
    source = tmp_path / "spmm.mlir"
    source.write_text(program("spmm", "csr"))
    out = tmp_path / "out"
    assert (
        main([str(source), "-o", str(out), "--explain", str(tmp_path / "a.npz"), "--k", "16"]) == 0
    )
    printed = capsys.readouterr().out
    chosen = printed.split("spmm (spmm, k=16): ", 1)[1].split(": ", 1)[0]
    assert chosen in candidates(matrix_stats(a), "spmm")
    assert f"timed on {a.nnz} nonzeros: csr " in printed  # the same decision as exe.prepare
    exe = sparsecomp.load(out)
    layout = exe.spmm.signature.args[0].layout
    assert layout.attr_text() == parse_layout(chosen).attr_text()
    b = np.ones((128, 16), np.float32)
    np.testing.assert_allclose(exe(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert main([str(source), "-o", str(out), "--explain", str(tmp_path / "missing.npz")]) == 1
    assert "cannot read the matrix" in capsys.readouterr().err


RULES = ["hyb:1:4", "hyb:2:8", "hyb:3:2", "bsr+csr:4x4", "bsr+csr:2x8:3", "bsr:4x4", "ell"]


def _rule_program(op: str, rule: str) -> str:
    """SpMV or SpMM (accumulating into an outs operand) with a rule on the matrix."""
    if op == "spmv":
        return f"""
#sparse = #sparse_iter.sparsity<unstructured>
func.func @f(%A: tensor<?x?xf32, #sparse> {{sparse_iter.decompose = "{rule}"}},
             %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {{
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #sparse>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""
    return f"""
#sparse = #sparse_iter.sparsity<unstructured>
func.func @f(%A: tensor<?x?xf32, #sparse> {{sparse_iter.decompose = "{rule}"}},
             %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #sparse>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


@given(
    rule=st.sampled_from(RULES),
    op=st.sampled_from(["spmv", "spmm"]),
    rows=st.sampled_from([0, 1, 17, 64]),
    cols=st.sampled_from([1, 9, 40]),
    density=st.floats(0, 0.5),
    shape=st.sampled_from(["random", "huge_row", "dense_blocks", "empty_rows"]),
    seed=st.integers(0, 1000),
)
@settings(max_examples=60, deadline=None)
def test_decomposed_execution_matches_scipy(
    rule: str, op: str, rows: int, cols: int, density: float, shape: str, seed: int
) -> None:
    """Every rule kind, on matrices with empty rows, one huge row, all-dense blocks or none."""
    rng = np.random.default_rng(seed)
    a = sp.random(rows, cols, density=density, random_state=seed, dtype=np.float32).tolil()
    if rows and shape == "huge_row":
        a[rng.integers(rows), :] = rng.standard_normal(cols)
    elif rows and shape == "dense_blocks":
        a[: min(rows, 8), : min(cols, 8)] = rng.standard_normal((min(rows, 8), min(cols, 8)))
    elif shape == "empty_rows":
        a[::2, :] = 0
    a = sp.csr_matrix(a, dtype=np.float32)
    exe = cpu_kernels.compiled(_rule_program(op, rule))
    if op == "spmv":
        x = rng.standard_normal(cols).astype(np.float32)
        y = rng.standard_normal(rows).astype(np.float32)
        np.testing.assert_allclose(exe(a, x, y), y + a @ x, rtol=1e-4, atol=1e-4)
    else:
        b = rng.standard_normal((cols, 5)).astype(np.float32)
        c = rng.standard_normal((rows, 5)).astype(np.float32)
        np.testing.assert_allclose(exe(a, b, c), c + a @ b, rtol=1e-4, atol=1e-4)


def test_the_gpu_model() -> None:
    """cuda targets: their own coefficients, no cache features, n:m but no dense."""
    from sparsecomp.formats.choice import DEFAULT_CUDA, device_of

    assert device_of("cuda:sm_90") == device_of("cuda-emu:sm_80") == "cuda"
    with pytest.raises(SparsecompError, match="cost models for 'host' and 'cuda:sm_XX'"):
        device_of("rocm:gfx90a")
    d = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    d[:, 1::4] = 0
    d[:, 2::4] = 0
    stats = matrix_stats(sp.csr_matrix(d))
    assert "nm:2:4" in candidates(stats, "spmm", "cuda")
    assert "nm:2:4" not in candidates(stats, "spmm", "host")
    assert "dense" in candidates(stats, "spmm", "host")
    assert "dense" not in candidates(stats, "spmm", "cuda")
    rng = np.random.default_rng(1)
    rows, cols = rng.integers(0, 4000, 80_000), rng.integers(0, 400_000, 80_000)
    big = sp.csr_matrix((np.ones(80_000), (rows, cols)), shape=(4000, 400_000))
    big_stats = matrix_stats(big)
    assert "gather.miss" in features("csr", big_stats, 64, "host")
    assert "gather.miss" not in features("csr", big_stats, 64, "cuda")
    choice = choose(sp.csr_matrix(d), "spmm", 32, target="cuda:sm_80")
    assert set(choice.estimates) == set(candidates(stats, "spmm", "cuda"))
    for layout, seconds in choice.estimates.items():
        assert seconds == predict(layout, stats, "spmm", 32, DEFAULT_CUDA, "cuda")


def test_emulated_gpu_calibration_measures_the_roofline() -> None:
    """calibrate --target cuda:sm_80 records the profiler's H100 estimate of each kernel."""
    from sparsecomp.tools.calibrate import EmulatedGpu, measure

    runner = EmulatedGpu("cuda:sm_80")
    runner.runs = (("spmv", 1),)
    runner.layouts = ("csr", "ell")
    a = sp.random(40, 30, density=0.2, format="csr", random_state=3, dtype=np.float32)
    records = measure({"small": a}, runner, lambda message: None)
    assert {r["layout"] for r in records} == {"csr", "ell"}
    (csr,) = [r for r in records if r["layout"] == "csr"]
    exe = sparsecomp.compile(program("spmv", "csr"), "cuda-emu:sm_80", profile=True)
    x = np.ones(30, np.float32)
    expected = exe.profile(SparseTensor.from_scipy(a, "csr"), x).h100_seconds
    assert csr["seconds"] == pytest.approx(expected)  # traffic does not depend on the values
    assert csr["features"] == features("csr", matrix_stats(a), 1, "cuda")


def test_prepare_refuses_another_dtype_as_a_call_does() -> None:
    """float64 data for a float32 kernel: refused with the cast to make, as a direct call
    does, not cast silently (``prepare`` used to ``astype`` it)."""
    a = power_law(30, 20, seed=6).astype(np.float64)
    exe = sparsecomp.compile(program("spmv", "csr"))
    with pytest.raises(SparsecompError, match="expected dtype float32, got float64"):
        exe(a, np.ones(20, np.float32))
    for layout in (None, "csr", "bsr:2x2"):
        with pytest.raises(SparsecompError, match=r"prepare\(\) for spmv: .*got float64"):
            exe.prepare(a, layout=layout)
    prepared = exe.prepare(a.astype(np.float32), layout="csr")
    np.testing.assert_allclose(prepared.tensor.to_dense(), a.toarray(), rtol=1e-6)


def test_prepare_on_an_emulated_gpu_uses_the_gpu_model() -> None:
    """A ``cuda-emu:sm_80`` executable runs that GPU's schedule: ``prepare`` ranks layouts
    with the GPU's model (dense is no GPU candidate) and times nothing on this CPU."""
    d = np.random.default_rng(2).standard_normal((64, 48)).astype(np.float32)
    d[np.abs(d) < 0.3] = 0  # about 24% zeros: the host model would take it dense
    a = sp.csr_matrix(d)
    exe = sparsecomp.compile(program("spmm", "csr"), "cuda-emu:sm_80")
    assert exe.manifest["emulates"] == "cuda:sm_80"
    prepared = exe.prepare(a, k=8)
    want = choose(a, "spmm", 8, target="cuda:sm_80")
    assert prepared.choice is not None
    assert prepared.choice.estimates == want.estimates
    assert prepared.layout == want.layout
    assert "dense" not in want.estimates
    assert "timed on" not in prepared.choice.why
    b = np.ones((48, 8), np.float32)
    bound = 2e-3 * (np.abs(d) @ b)  # block layouts run as TF32 on tensor cores
    assert np.all(np.abs(exe(prepared, b) - d @ b) <= bound)


@pytest.mark.parametrize("layout", ["hyb:1:8", "bsr+csr:4x4"])
def test_prepare_refuses_composable_sddmm_results(layout: str) -> None:
    """SDDMM returns its result in its operand's layout: a composable one is refused up
    front, in one line, not by three copies of a compile error about the variant."""
    exe = sparsecomp.compile(program("sddmm", "csr"))
    with pytest.raises(SparsecompError, match=r"composable layout \(.*\) cannot be built") as e:
        exe.prepare(power_law(40, 30, seed=4), layout=layout)
    assert len(str(e.value)) < 300


def test_prepare_takes_float16_tensors_and_refuses_bad_operands(tmp_path) -> None:
    """A float16 SparseTensor is prepared from itself (its scipy form is float32, which
    was refused), in a forced or a chosen layout; k < 1 and a vector are clean errors
    (ZeroDivisionError, ValueError); a loaded executable prepares in its own layout
    (the choice tried to compile variants)."""
    rng = np.random.default_rng(7)
    d = ((rng.random((40, 24)) < 0.2) * rng.standard_normal((40, 24))).astype(np.float16)
    exe = sparsecomp.compile(program("spmm", "csr").replace("f32", "f16"))
    b = np.ones((24, 4), np.float16)
    want = d.astype(np.float32) @ b.astype(np.float32)
    for layout in ("bsr:2x2", None):
        prepared = exe.prepare(SparseTensor.from_dense(d, "csr"), layout=layout, k=4)
        assert prepared.tensor.dtype == np.float16
        np.testing.assert_allclose(exe(prepared, b).astype(np.float32), want, atol=2e-2)
    spmm = sparsecomp.compile(program("spmm", "csr"))
    a = power_law(30, 20, seed=8)
    for k in (0, -3):
        with pytest.raises(SparsecompError, match=f"must be at least 1, got {k}"):
            spmm.prepare(a, k=k)
        with pytest.raises(SparsecompError, match=f"must be at least 1, got {k}"):
            choose(a, "spmm", k)
    vector = sp.coo_array(np.array([0.0, 1.0, 2.0], np.float32))
    with pytest.raises(SparsecompError, match=r"takes a matrix, not an operand of shape \(3,\)"):
        spmm.prepare(vector)
    loaded = sparsecomp.load(spmm.save(tmp_path / "k"))
    prepared = loaded.prepare(a)
    assert prepared.layout == "csr"
    np.testing.assert_allclose(
        loaded(prepared, np.ones((20, 2), np.float32)), a @ np.ones((20, 2)), rtol=1e-5
    )
