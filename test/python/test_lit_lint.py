"""Lint the lit suite: every RUN line checks something (STYLE.md, FileCheck section)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

LIT = Path(__file__).resolve().parents[1] / "lit"
FILES = sorted(p for p in LIT.rglob("*.mlir") if "Inputs" not in p.parts)


def run_lines(path: Path) -> list[str]:
    """RUN commands, with lit's trailing-backslash continuations joined."""
    commands: list[str] = []
    pending = ""
    for m in re.finditer(r"//\s*RUN:\s*(.*)", path.read_text()):
        line = pending + m.group(1).strip()
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        commands.append(line)
        pending = ""
    return commands


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(LIT)))
def test_run_lines_check_something(path):
    lines = run_lines(path)
    assert lines, "a lit test without RUN lines tests nothing"
    for line in lines:
        checks = any(tool in line for tool in ("FileCheck", "--verify-diagnostics", "diff "))
        assert checks or line.startswith("not "), f"RUN line checks nothing: {line}"
        if "FileCheck" in line:
            assert re.search(r"FileCheck (%s|%s\b)", line) or "FileCheck %s" in line, line


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(LIT)))
def test_split_marker_needs_split_flag(path):
    text = path.read_text()
    if "\n// -----\n" in text:
        assert all(
            "--split-input-file" in ln for ln in run_lines(path) if "sparsecomp-opt %s" in ln
        )


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(LIT)))
def test_prefixes_are_used(path):
    text = path.read_text()
    for prefix in re.findall(r"--check-prefix=(\S+)", text):
        assert re.search(rf"//\s*{re.escape(prefix)}(-\w+)?:", text), f"unused prefix {prefix}"
