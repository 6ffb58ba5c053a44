"""benchmarks/cuda_calibrate.py: profiles the GPU run's cases, fits the estimate, ranks."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from sparsecomp.runtime import gpu_model


def _run(repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "cuda_calibrate.py"), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_profile_step_counts_every_case(repo, tmp_path) -> None:
    """rajat01 (a circuit matrix with a few long rows): each case profiled, checked against
    scipy inside the script, its busiest warp far above the mean."""
    out = tmp_path / "p.json"
    done = _run(repo, "profile", "--matrices", "rajat01", "--max-records", "50000",
                "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [(r["op"], r["k"]) for r in rows] == [
        ("spmv", None), ("spmm", 32), ("spmm", 128), ("sddmm", 32)
    ]  # fmt: skip
    for r in rows:
        assert r["sectors"] > 0
        assert r["warps"] > 0
        assert 0 < r["sampled"] <= 1
        assert r["longest_warp"] > 10 * r["mean_warp"]


def test_fit_and_predict_on_times_a_known_model_made(repo, tmp_path) -> None:
    """Times made by a known model: the fit ranks every op perfectly, left-out included,
    and predict prints each case's estimate beside its measured time."""
    rng = np.random.default_rng(3)
    truth = {"host": 8e-5, "launch": gpu_model.LAUNCH, "byte": 2e-13, "busiest": 1.5e-7,
             "request": 1e-11}  # fmt: skip
    rows, lines = [], ["op,k,matrix,ours_ms,peer,peer_ms"]
    for m in range(8):
        for op, k in (("spmv", None), ("spmm", 32), ("spmm", 128), ("sddmm", 32)):
            row = {"op": op, "k": k, "matrix": f"m{m}", "launches": 1,
                   "sectors": float(10 ** rng.uniform(4, 8)),
                   "requests": float(10 ** rng.uniform(3, 7)), "shared_requests": 0.0,
                   "longest_warp": float(10 ** rng.uniform(1, 4)), "roofline_s": 1e-6}  # fmt: skip
            features = {"launches": 1, "bytes": 32 * row["sectors"],
                        "requests": row["requests"], "busiest": row["longest_warp"]}  # fmt: skip
            ms = gpu_model.estimate_seconds(features, truth) * 1e3
            rows.append(row)
            lines.append(f"{op},{k or ''},m{m},{ms:.6f},peer,1.0")
    profiles, measured = tmp_path / "p.json", tmp_path / "t.csv"
    profiles.write_text(json.dumps(rows))
    measured.write_text("\n".join(lines) + "\n")
    md = tmp_path / "fit.md"
    done = _run(repo, "fit", "--profiles", str(profiles), "--measured", str(measured),
                "--markdown", str(md))  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = [r.split("|")[1:-1] for r in md.read_text().splitlines() if r.startswith("| s")]
    assert [c[0].strip() for c in table] == ["spmv", "spmm K=32", "spmm K=128", "sddmm K=32"]
    for cells in table:
        assert float(cells[2]) == 1.0, cells
        assert float(cells[3]) >= 0.95, cells
    done = _run(repo, "predict", str(profiles), "--measured", str(measured))
    assert done.returncode == 0, done.stderr
    assert "| spmm K=128 | m7 |" in done.stdout


def test_shipped_model_is_the_fit_of_the_shipped_profiles(repo, tmp_path) -> None:
    """gpu_model.H100_MODEL is what the fit gives for the H100 run's profiles kept in
    benchmarks/data, with the rank correlations docs/benchmarks.md quotes."""
    data = repo / "benchmarks" / "data"
    md = tmp_path / "fit.md"
    done = _run(repo, "fit", "--profiles", str(data / "h100-2026-11-27-profiles.json"),
                "--markdown", str(md))  # fmt: skip
    assert done.returncode == 0, done.stderr
    fitted = json.loads(done.stdout.split("model:", 1)[1])
    for name, value in gpu_model.H100_MODEL.items():
        assert value == pytest.approx(fitted[name], rel=0.01), name
    table = {r.split("|")[1].strip(): r.split("|")[2:-1]
             for r in md.read_text().splitlines() if r.startswith("| s")}  # fmt: skip
    left_out = {op: float(cells[2]) for op, cells in table.items()}
    assert left_out == {"spmv": 0.76, "spmm K=32": 0.93, "spmm K=128": 0.92, "sddmm K=32": 0.94}
    assert float(table["spmv"][3]) < 0.3  # the roofline's


def test_fit_reads_a_gpu_runs_markdown(repo, tmp_path) -> None:
    """A later GPU run's cuda.md (benchmarks/cuda.py --markdown) calibrates as the CSV
    does: the H100 table of docs/benchmarks.md, taken as such a file, fits the same."""
    lines = (repo / "docs" / "benchmarks.md").read_text().splitlines()
    start = lines.index("| op | matrix | ours ms | peer | peer ms | ratio |")
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    table = tmp_path / "cuda.md"
    table.write_text("\n".join(["a GPU run", "", *lines[start:end]]) + "\n")
    by_csv, by_md = tmp_path / "a.md", tmp_path / "b.md"
    for measured, out in ((None, by_csv), (table, by_md)):
        extra = ["--measured", str(measured)] if measured else []
        done = _run(repo, "fit", "--markdown", str(out), *extra)
        assert done.returncode == 0, done.stderr
    assert by_csv.read_text().splitlines()[1:] == by_md.read_text().splitlines()[1:]
