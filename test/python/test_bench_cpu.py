"""benchmarks/cpu.py --quick runs end to end and prints every op's table."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from long_runs import LONG


def test_cpu_benchmark_quick(repo, tmp_path):
    md = tmp_path / "cpu.md"
    # every quick matrix under --long; two (a graph, a band) in a plain run
    subset = [] if LONG else ["--matrices", "rmat,band"]
    proc = subprocess.run(
        [
            sys.executable,
            str(repo / "benchmarks" / "cpu.py"),
            "--quick",
            "--markdown",
            str(md),
            *subset,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    titles = ("## SpMV", "## SpMM C = A B, K=32", "## SpMM C = A B, K=128", "## SDDMM", "## SpGEMM")
    for title in titles:
        assert title in out, title
    assert "## Compile times" in out
    assert md.read_text().strip() == out.strip()
    # Every peer has a column (or says why it could not run); no peer computes garbage.
    header = next(ln for ln in out.splitlines() if ln.startswith("| matrix"))
    peers = ("sparsecomp ms", "sparsecomp-scipy ms", "sparsecomp-up ms", "scipy ms", "dense ms")
    for peer in (*peers, "upstream ms"):
        assert peer in header
    # both program forms in the summary, and the call overhead measured
    assert "## Summary" in out
    assert "| spmm K=32 | sparsecomp-up |" in out
    assert "| spgemm | sparsecomp-up |" in out
    # the program form's cost apart from the scipy operand's, per op
    forms = out[out.index("## Program form and operand") :]
    assert "| sparsecomp-up / sparsecomp-scipy |" in forms
    assert re.search(r"^\| spmv \| \d+\.\d\d \(worst \d+\.\d\d\) \|", forms, re.M), forms
    assert "| sparsecomp, SparseTensor |" in out
    assert "| scipy (a @ b) |" in out
    assert "WRONG" not in out, out
    if importlib.util.find_spec("torch") is None:
        assert "torch not installed" in out
    else:
        assert "torch ms" in header
    # Intel MKL (the bench extra), both forms, checked against scipy like every peer
    if importlib.util.find_spec("sparse_dot_mkl") is None:
        assert "- mkl-opt: not available: mkl not installed" in out
    else:
        assert "mkl ms" in header
        assert "mkl-opt ms" in header
        assert "MKL's sparse BLAS has no SDDMM" in out
        assert "mkl-opt-sorted ms" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| rmat")]
    assert len(rows) == 5  # one per table
    # the upstream sparsifier's SpGEMM runs (its i1 buffers widened) and is checked
    spgemm = out[out.index("## SpGEMM") :]
    lines = spgemm.splitlines()
    names = [c.strip() for c in next(ln for ln in lines if ln.startswith("| matrix")).split("|")]
    rmat = [c.strip() for c in next(ln for ln in lines if ln.startswith("| rmat")).split("|")]
    assert float(rmat[names.index("upstream ms")]) > 0, rmat
    # SpGEMM with its rows unordered as well (scipy's and MKL's like)
    assert float(rmat[names.index("sparsecomp-unsorted ms")]) > 0, rmat


def test_cpu_benchmark_without_torch(repo, tmp_path):
    # A `torch` that fails to import stands in for an environment without the bench extra.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(repo / "benchmarks" / "cpu.py"),
            "--quick",
            "--ops",
            "spmv",
            "--matrices",
            "rmat",
            "--peers",
            "sparsecomp,scipy,torch",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "torch not installed" in proc.stdout
    assert "| rmat |" in proc.stdout


def test_upstream_compiler_abort_is_reported(repo, tmp_path, monkeypatch):
    # The upstream pipelines run in a worker process; a worker that dies (as this
    # MLIR build does on sparse outputs needing access-pattern expansion) is
    # reported as Aborted with the signal and its last words, and replaced.
    monkeypatch.syspath_prepend(str(repo / "benchmarks"))
    from peers import Aborted, upstream

    fake = tmp_path / "worker.py"
    fake.write_text(
        "import os, sys\n"
        "sys.stdin.readline()\n"
        "print('python: X.cpp:1: f: Assertion `x` failed.', file=sys.stderr)\n"
        "os.abort()\n"
    )
    monkeypatch.setattr(upstream, "WORKER", fake)
    worker = upstream._Worker()
    try:
        for _ in range(2):
            with pytest.raises(Aborted, match=r"SIGABRT.*Assertion `x` failed"):
                worker.lower("module {}", "builtin.module()", "k")
    finally:
        worker.close()
        shutil.rmtree(worker.dir)


def test_summary_worst_cases_point_the_right_way(repo, monkeypatch):
    # Peer columns ("peer / form", above 1: the form is faster) show the smallest
    # ratio as the worst case; the forms' column ("form / first", above 1: the
    # form is slower) the largest.
    monkeypatch.syspath_prepend(str(repo / "benchmarks"))
    from report import Cell, Row, summary

    def row(name, ours, up, peer):
        cells = {"ours": Cell(ours), "up": Cell(up), "peer": Cell(peer)}
        return Row(name, 1, 1, cells)

    rows = {"spmv": [row("a", 1.0, 1.5, 2.0), row("b", 1.0, 0.8, 0.5)]}
    lines = summary(rows, ["ours", "up"], ["ours", "up", "peer"])
    assert lines[0] == "| op | form | form / ours | peer / form |"
    assert lines[2] == "| spmv | ours | - | 1.00 (worst 0.50) |"
    assert lines[3] == "| spmv | up | 1.10 (worst 1.50) | 0.91 (worst 0.62) |"


def test_spmv_floor_quick(repo):
    """benchmarks/spmv_floor.py checks its floor kernel and the SpMVs against scipy and
    prints a ratio per matrix and their geomeans."""
    proc = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "spmv_floor.py"), "--quick"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| ")][2:]
    assert [r.split("|")[1].strip() for r in rows][-1] == "geomean"
    assert len(rows) == 1 + len([ln for ln in proc.stderr.splitlines() if ln.endswith(" done")])
    for row in rows[:-1]:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert all(float(c) > 0 for c in cells[2:5] + cells[6:]), row


@pytest.mark.parametrize("ordered", [False, True])
def test_spgemm_builds_quick(repo, ordered: bool):
    """benchmarks/spgemm_builds.py compiles the SpGEMM kernel as shipped and with every
    call in three passes, checks both against scipy and prints their times and ratio."""
    command = [sys.executable, str(repo / "benchmarks" / "spgemm_builds.py"), "--quick"]
    proc = subprocess.run(
        command + (["--ordered"] if ordered else []),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| ")][2:]
    assert len(rows) == 2, proc.stdout
    assert rows[-1].startswith("| geomean"), proc.stdout
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert all(float(c) > 0 for c in cells[1:]), rows[0]


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (["--ops", "bogus"], "--ops: unknown bogus"),
        (["--peers", "nosuch"], "--peers: unknown nosuch"),
        (["--upstream", "nosuch"], "--upstream: unknown nosuch"),
        (["--matrices", "nosuch"], "--matrices: unknown nosuch"),
        (["--markdown", "/nonexistent_dir/x.md"], "--markdown: no folder /nonexistent_dir"),
    ],
)
def test_cpu_benchmark_refuses_unknown_names_before_it_runs(repo, argument, said) -> None:
    """A typo in --ops ran every matrix and ended in a KeyError; a --markdown path in a
    missing folder failed after the whole run (session 44)."""
    proc = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "cpu.py"), "--quick", *argument],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert said in proc.stderr
    assert "#" not in proc.stderr  # refused before any matrix was built or timed


def test_bandwidth_takes_its_options(repo) -> None:
    """bandwidth.py ran its 512 MiB measurement whatever it was given, --help included."""
    proc = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "bandwidth.py"), "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0
    assert "--quick" in proc.stdout
    assert "GB/s" not in proc.stdout
