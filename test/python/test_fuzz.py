"""The differential fuzzer: its pieces, and a fixed set of cases that must not fail.

``test_fixed_seed_set`` runs ``scripts/fuzz`` on a fixed seed set (the same
cases every run) in worker processes with a private cache, and fails on any
crash, wrong result, Python traceback or timeout of the ``py`` and ``cli``
paths, listing the failing classes. Refusals (located errors) are allowed.
"""

from __future__ import annotations

import json

import numpy as np

from long_runs import strength
from sparsecomp.fuzz import cli, report
from sparsecomp.fuzz.case import make_case, mismatch
from sparsecomp.fuzz.mainwrap import MARKER, main_program, parse_printed

#: seed 11, cases 0..CASES-1: 150 under ``scripts/test --long`` (about 4 minutes on 2
#: cores: 1.5 s per case, plus timeouts), the first 20 of them in a plain run
SEED, CASES = 11, strength(20, 150)
#: cases of the emulation run (seed 7), of which at least a quarter run (not refused)
EMU_CASES = strength(30, 80)


def test_cases_are_reproducible() -> None:
    for i in range(30):
        a, b = make_case(3, i), make_case(3, i)
        assert a.kernel == b.kernel
        assert all(np.array_equal(a.arrays[k], b.arrays[k]) for k in a.arrays)
        assert np.array_equal(a.expected, b.expected, equal_nan=True)
        assert main_program(a.prog, a.arrays) == main_program(b.prog, b.arrays)


def test_reference_matches_numpy_on_matmul() -> None:
    """The generic evaluator against a direct numpy product, on generated matmuls
    (and the elementwise op after it, where there is one)."""
    checked = epilogues = 0
    for i in range(400):
        case = make_case(5, i)
        p = case.prog
        if p.kind != "matmul" or p.init == "arg" or not p.is_float:
            continue
        a, b = case.arrays["a"], case.arrays["b"]
        a = a if p.ins[0].dims == (0, 2) else a.T
        b = b if p.ins[1].dims == (2, 1) else b.T
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(case.expected.dtype)
        with np.errstate(all="ignore"):
            for _, op, _ in p.epilogue:  # an elementwise op after the product
                want = {"relu": lambda v: np.maximum(v, 0), "neg": np.negative,
                        "addc": lambda v: v + 1, "mul": np.square, "exp": np.exp,
                        "cos": np.cos}[op](want).astype(case.expected.dtype)  # fmt: skip
        assert not mismatch(case, want), (i, p.describe())
        checked += 1
        epilogues += bool(p.epilogue)
    assert checked > 5
    assert epilogues > 0


def test_printed_results_are_parsed() -> None:
    text = f"noise\n{MARKER}\n1.5\n-2\nnan\n3e+07\n"
    got = parse_printed(text, (2, 2))
    assert got is not None
    assert got[0, 0] == 1.5
    assert got[1, 1] == 3e7
    assert np.isnan(got[1, 0])
    assert parse_printed(text, (5,)) is None  # a short print is not a result
    assert parse_printed("1\n2\n", (2,)) is None  # nothing after the marker


def test_messages_are_normalized_into_classes() -> None:
    a = '<source>:3:7: error: cannot lower tensor<4x?xf32, #sparse_iter.layout<["x"]>> at line 12'
    b = "/tmp/f-1/main.mlir:9:1: error: cannot lower tensor<2x2xf64> at line 3"
    assert report.normalize(a) == report.normalize(b) == "cannot lower TYPE at line N"


def test_fixed_seed_set(tmp_path, private_cache) -> None:
    out = tmp_path / "fuzz"
    rc = cli.main(["--cases", str(CASES), "--seed", str(SEED), "--jobs", "2", "-q",
                   "--out", str(out), "--timeout", "120"])  # fmt: skip
    text = (out / "report.txt").read_text()
    assert rc == 0, text


def test_fixed_seed_set_under_gpu_emulation(tmp_path, private_cache) -> None:
    """The same generator through the CUDA schedule run on the CPU (the ``emu`` path)."""
    out = tmp_path / "fuzz"
    rc = cli.main(["--cases", str(EMU_CASES), "--seed", "7", "--jobs", "1", "-q", "--paths", "emu",
                   "--out", str(out), "--timeout", "120"])  # fmt: skip
    assert rc == 0, (out / "report.txt").read_text()
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ran = [r for r in results if r["results"]["emu"]["status"] == "ok"]
    assert len(ran) >= EMU_CASES // 4, (out / "report.txt").read_text()  # not all refused


def test_script_runs(repo) -> None:
    import subprocess

    done = subprocess.run([str(repo / "scripts" / "fuzz"), "--help"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--cases" in done.stdout
