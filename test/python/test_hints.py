"""Every hint that names a command works as written.

The scan finds each string in ``python/sparsecomp`` (docstrings aside) and each
``hint:`` line of docs/troubleshooting.md that names a command
(``sparsecomp-opt``/``-compile``/``-run``, ``python -m``, ``pip install``, a
``SPARSECOMP_*=`` knob); :data:`HINTS` must hold an entry for each, and every
entry's check triggers the error where it can, takes the command out of the
hint and runs it as written (a shell, the virtual environment's ``bin`` first on
``PATH``), then checks that it does what the hint says. ``pip install`` hints
are checked against pyproject.toml (no network). A new hint naming a command
fails the scan until it has an entry here.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import sparsecomp
from sparsecomp import knobs
from sparsecomp.errors import CompileError, PipelineError, ToolchainError

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "sparsecomp"
NAMES_A_COMMAND = re.compile(
    r"\b(?:sparsecomp-(?:opt|compile|run)|python -m|pip install)\s+[-'\w.{]|\bSPARSECOMP_[A-Z_]+="
)
#: A command in a hint: the program, then words (quoted parts kept whole) up to
#: the end, or up to a word that starts with one of ( ) ; , ` (prose after it).
COMMAND = re.compile(
    r"(?:sparsecomp-(?:opt|compile|run)|python -m)(?:\s+(?:[^\s'`();,]|'[^']*')+)*"
)
#: Any pass or pipeline a message names.
PASS_OR_PIPELINE = re.compile(r"\b(?:sparse-iter|sparsecomp)-[a-z0-9-]*[a-z0-9]\b(?!-)")

pytestmark = pytest.mark.usefixtures("private_cache")


def _strings(path: Path) -> list[str]:
    """Each string literal of a module, an f-string with ``{}`` for its fields; no docstrings."""
    return list(_literals(path.read_text()))


@functools.cache
def _package_strings() -> list[tuple[Path, str]]:
    return [(path, text) for path in sorted(PACKAGE.rglob("*.py")) for text in _strings(path)]


def _literals(source: str) -> Iterator[str]:
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring (or a bare expression)
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in skip:
                yield node.value


def _docs_hints() -> Iterator[str]:
    for line in (REPO / "docs" / "troubleshooting.md").read_text().splitlines():
        if line.strip().startswith("hint: "):
            yield line.strip().removeprefix("hint: ")


def found() -> set[tuple[str, str]]:
    """``(where, text)`` of every string and docs hint that names a command."""
    out = {
        (str(path.relative_to(PACKAGE)), text)
        for path, text in _package_strings()
        if NAMES_A_COMMAND.search(text)
    }
    docs = {t for t in _docs_hints() if NAMES_A_COMMAND.search(t)}
    return out | {("docs/troubleshooting.md", t) for t in docs}


def command(hint: str) -> str:
    match = COMMAND.search(hint)
    assert match, f"no command in {hint!r}"
    return match.group(0)


def run(hint: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The hint's command, run as written in a shell with the venv's ``bin`` first on PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        command(hint), shell=True, cwd=cwd, env={**os.environ, "PATH": path},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _hint_of(error: type[Exception], call: Callable[[], object]) -> str:
    with pytest.raises(error) as info:
        call()
    hint = getattr(info.value, "hint", None)
    assert hint, f"{info.value} has no hint"
    return hint


# -- the checks: trigger the error, run its hint ------------------------------


def check_lowering_before_translation(tmp_path: Path) -> None:
    """aot.translate: a module that is not all LLVM dialect, saved and lowered by the hint."""
    from mlir import ir

    from sparsecomp.compiler.aot import build_shared_library
    from sparsecomp.ir.context import make_context
    from sparsecomp.targets import detect_host

    with make_context():
        module = ir.Module.parse("func.func @f() {\n  return\n}")
        hint = _hint_of(
            ToolchainError, lambda: build_shared_library(module, tmp_path, detect_host(), [])
        )
    done = run(hint, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "llvm.func @f()" in done.stdout


EXTRACT = """#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                                 posWidth = 32, crdWidth = 32}>

func.func @corner(%A: tensor<?x?xf32, #csr>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = tensor.extract %A[%c0, %c0] : tensor<?x?xf32, #csr>
  return %v : f32
}
"""


def check_stage_reproducer(tmp_path: Path) -> None:
    """A failing stage: the hint reruns it on its saved input, with the same located error."""
    source = tmp_path / "extract.mlir"
    source.write_text(EXTRACT)
    hint = _hint_of(CompileError, lambda: sparsecomp.compile(source))
    assert hint.startswith("reproduce with: ")
    done = run(hint, tmp_path)
    assert done.returncode == 1
    said = "error: 'tensor.extract' on a sparse tensor is not supported by the lowering"
    assert f"{source}:6:8: {said}" in done.stderr


def check_upstream_pass_list(tmp_path: Path) -> None:
    """An unknown pass, and --list-passes: both point at the list of upstream passes."""
    from sparsecomp.tools.listing import list_passes
    from sparsecomp.transforms import get_pass

    with pytest.raises(PipelineError) as info:
        get_pass("sparse-iter-no-such-pass")
    assert command(info.value.message) == command(list_passes())
    done = run(info.value.message, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "convert-scf-to-openmp" in done.stdout


def check_stale_dialect_doc(tmp_path: Path) -> None:
    """odsgen --check-doc on a stale page: its command regenerates the page."""
    from sparsecomp.ir import odsgen

    page = tmp_path / "dialect.md"
    page.write_text("stale\n")
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert odsgen.main(["--check-doc", str(page)]) == 1
    assert run(said.getvalue(), tmp_path).returncode == 0
    assert odsgen.main(["--check-doc", str(page)]) == 0


def check_tool_programs(tmp_path: Path) -> None:
    """Program names of ``python -m`` tools (their usage lines): each runs."""
    for module in ("sparsecomp.ir.odsgen", "sparsecomp.tools.where"):
        done = run(f"python -m {module} --help", tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"usage: python -m {module}" in done.stdout


def check_generated_pages(tmp_path: Path) -> None:
    """The commands generated pages name in their headers write those pages."""
    from sparsecomp.tools.apidoc import page
    from sparsecomp.tools.listing import passes_markdown

    (tmp_path / "docs").mkdir()
    for text, written, title in [
        (passes_markdown(), None, "# sparsecomp passes"),
        (page(), tmp_path / "docs" / "api.md", "# Python API reference"),
    ]:
        done = run(text, tmp_path)
        assert done.returncode == 0, done.stderr
        assert (written.read_text() if written else done.stdout).startswith(title)


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in requirements}  # type: ignore[union-attr]


def check_pip_install_project(tmp_path: Path) -> None:
    """``pip install -e .``: the repository root is the sparsecomp project, which builds
    the dialect at install (setup.py)."""
    project = _pyproject()
    assert project["project"]["name"] == "sparsecomp"
    assert "dialects" in (REPO / "setup.py").read_text()


def check_pip_install_runtime_libraries(tmp_path: Path) -> None:
    """``pip install {package}``: each runtime library's package is a dependency."""
    from sparsecomp.runtime.libs import LIBRARIES

    dependencies = _names(_pyproject()["project"]["dependencies"])
    assert {package for _, _, package in LIBRARIES.values()} <= dependencies


def check_pip_install_cuda_extra(tmp_path: Path) -> None:
    """``pip install 'sparsecomp[cuda]'``: the extra exists and holds the packages named."""
    extra = _names(_pyproject()["project"]["optional-dependencies"]["cuda"])
    assert {"cuda-bindings", "nvidia-cuda-nvcc"} <= extra


def check_in_process_knob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SPARSECOMP_COMPILE_IN_PROCESS=1``: a declared knob that turns the server off."""
    monkeypatch.setenv("SPARSECOMP_COMPILE_IN_PROCESS", "1")
    assert knobs.compile_in_process()


@dataclass(frozen=True)
class Hint:
    where: str  #: module under python/sparsecomp, or docs/troubleshooting.md
    marker: str  #: a piece of the hint's text there
    check: Callable[..., None]


HINTS = [
    Hint("compiler/aot.py", "lower it to the LLVM dialect", check_lowering_before_translation),
    Hint("compiler/build.py", "reproduce with: sparsecomp-opt", check_stage_reproducer),
    Hint("docs/troubleshooting.md", "reproduce with: sparsecomp-opt", check_stage_reproducer),
    Hint("transforms/__init__.py", "passes: sparsecomp-opt --list-upstream-passes",
         check_upstream_pass_list),
    Hint("tools/listing.py", "(sparsecomp-opt --list-upstream-passes)", check_upstream_pass_list),
    Hint("ir/odsgen.py", "python -m sparsecomp.ir.odsgen --doc {}", check_stale_dialect_doc),
    Hint("ir/odsgen.py", "python -m sparsecomp.ir.odsgen", check_tool_programs),
    Hint("tools/where.py", "python -m sparsecomp.tools.where", check_tool_programs),
    Hint("tools/listing.py", "`python -m sparsecomp.tools.listing`", check_generated_pages),
    Hint("tools/apidoc.py", "`python -m sparsecomp.tools.apidoc > docs/api.md`",
         check_generated_pages),
    Hint("ir/odsgen.py", "pip install -e .", check_pip_install_project),
    Hint("ir/context.py", "pip install -e .", check_pip_install_project),
    Hint("runtime/libs.py", "pip install {}", check_pip_install_runtime_libraries),
    Hint("compiler/ptxas.py", "pip install 'sparsecomp[cuda]'", check_pip_install_cuda_extra),
    Hint("runtime/cuda.py", "pip install 'sparsecomp[cuda]'", check_pip_install_cuda_extra),
    Hint("compiler/server.py", "SPARSECOMP_COMPILE_IN_PROCESS=1", check_in_process_knob),
]  # fmt: skip


def _entry(where: str, text: str) -> list[Hint]:
    """The entries for a string (the longest marker wins where markers nest)."""
    matching = [h for h in HINTS if h.where == where and h.marker in text]
    longest = max((len(h.marker) for h in matching), default=0)
    return [h for h in matching if len(h.marker) == longest]


def test_every_hint_naming_a_command_has_a_check() -> None:
    strings = found()
    unchecked = sorted(f"{where}: {text!r}" for where, text in strings if not _entry(where, text))
    assert not unchecked, "hints naming a command without an entry in HINTS:\n" + "\n".join(
        unchecked
    )
    used = {id(h) for where, text in strings for h in _entry(where, text)}
    stale = [f"{h.where}: {h.marker!r}" for h in HINTS if id(h) not in used]
    assert not stale, f"entries in HINTS that match no hint any more: {stale}"


@pytest.mark.parametrize(
    "check", list(dict.fromkeys(h.check for h in HINTS)), ids=lambda c: c.__name__
)
def test_hint_works_as_written(check, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SPARSECOMP_REPRODUCER_DIR", str(tmp_path / "reproducers"))
    if "monkeypatch" in check.__code__.co_varnames[: check.__code__.co_argcount]:
        check(tmp_path, monkeypatch)
    else:
        check(tmp_path)


def test_messages_name_only_passes_and_pipelines_that_exist() -> None:
    from sparsecomp.transforms import get_all_passes
    from sparsecomp.transforms.pipeline import named_pipelines

    known = {*get_all_passes(), *named_pipelines(), "sparsecomp-opt", "sparsecomp-compile"}
    known.add("sparsecomp-run")
    unknown = sorted(
        f"{path.relative_to(PACKAGE)}: {name}"
        for path, text in _package_strings()
        for name in PASS_OR_PIPELINE.findall(text)
        if name not in known
    )
    assert not unknown, unknown
