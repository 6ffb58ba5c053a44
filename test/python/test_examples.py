"""Every example named in the README runs through the documented pipeline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparsecomp.tools.opt import main

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.mlir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_its_documented_command(path, capsys):
    documented = re.search(r"sparsecomp-opt \S+ --pass-pipeline='([^']+)'", path.read_text())
    assert documented, f"{path.name} must document its sparsecomp-opt command"
    assert main([str(path), f"--pass-pipeline={documented.group(1)}"]) == 0
    out = capsys.readouterr().out
    assert "func.func" in out
    assert '"sparse_iter.unset_encoding"' not in out


def test_readme_main_command_names_an_example(repo):
    demo = (repo / "scripts" / "demo").read_text()
    assert any(p.name in demo for p in EXAMPLES)
