"""Every example compiles, runs and matches scipy, as the README's main command does."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.mlir"))


def _runner():
    spec = importlib.util.spec_from_file_location("examples_run", REPO / "examples" / "run.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_matches_scipy(path: Path, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    run = _runner()
    monkeypatch.setattr(run, "ROWS", 300)
    monkeypatch.setattr(run, "COLS", 200)
    monkeypatch.setattr(run, "DENSITY", 0.05)
    assert f"python examples/run.py examples/{path.name}" in path.read_text()
    assert run.main([str(path)]) == 0
    assert "matches scipy" in capsys.readouterr().out


def test_readme_main_command_runs_every_example(repo) -> None:
    demo = (repo / "scripts" / "demo").read_text()
    assert all(p.name in demo for p in EXAMPLES)


#: Runs its arguments and prints the peak resident memory of the largest process among
#: them and their children (ru_maxrss: KiB on Linux).
_PEAK = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(done.stdout)
"""


def test_the_demo_checks_results_in_bounded_memory(repo) -> None:
    """examples/run.py at the demo's full size (20000 x 20000) peaks well below 2 GB:
    its SDDMM check densified both 20000 x 20000 results (8 GB)."""
    script = [
        sys.executable,
        str(repo / "examples" / "run.py"),
        str(EXAMPLES[0].parent / "sddmm.mlir"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *script], capture_output=True, text=True, timeout=600
    )
    status, kib = done.stdout.split("\n", 1)[0].split()
    assert status == "0", done.stderr
    assert "matches scipy" in done.stdout
    assert int(kib) * 1024 < 1.5 * 2**30, f"peak resident memory {int(kib) / 2**20:.2f} GiB"
