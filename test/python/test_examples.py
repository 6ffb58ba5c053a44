"""Every example compiles, runs and matches scipy, as the README's main command does."""

from __future__ import annotations

import importlib.util
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
