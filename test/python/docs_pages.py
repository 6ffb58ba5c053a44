"""Run the code blocks of a Markdown page and compare what they print.

The rules a page follows (README.md, docs/guide.md, docs/troubleshooting.md):

- a ``python`` block runs in one namespace per page, in page order; a ``sh``
  block runs in ``bash -e -o pipefail`` with this interpreter's ``bin``
  folder first on ``PATH`` (so a block shows a failing command's status
  with ``cmd || echo "exit status $?"``);
- an ``mlir`` block whose first line is ``// file: NAME`` is written to
  ``NAME`` before any block runs (so blocks may use files defined later);
- a ``text`` block right after a runnable block (blank lines between are
  allowed) is what that block prints, stdout and stderr together; ``...``
  matches anything (doctest's ELLIPSIS); a Python exception prints as its
  last traceback line, ``module.Class: message``;
- ``<!-- not run: why -->`` on the line before a block exempts it; any other
  block is an error, so a page cannot grow a block nobody runs.

Blocks run in a scratch folder holding links to the repository's top-level
entries (``examples/``, ``test/``, ...), so paths in the docs read as they do
from a clone and files a block writes land in the scratch folder.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import linecache
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- not run: .+ -->$")
FILE = re.compile(r"^// file: (\S+)$")
RUNNABLE = ("python", "sh")


@dataclass
class Block:
    lang: str
    text: str
    line: int  # of the opening fence, 1-based
    skipped: bool
    end: int  # the closing fence's index, 0-based (of the expected output, once attached)
    expected: str | None = None


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, each ``text`` block attached to the runnable one before it."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
        text = "\n".join(lines[start + 1 : end]) + "\n"
        skipped = start > 0 and bool(SKIP.match(lines[start - 1].strip()))
        block = Block(match.group(1), text, start + 1, skipped, end)
        previous = found[-1] if found else None
        between = lines[previous.end + 1 : start] if previous else []
        if (
            block.lang == "text"
            and previous is not None
            and previous.lang in RUNNABLE
            and previous.expected is None
            and all(not s.strip() for s in between)
        ):
            previous.expected = text
            previous.end = end
        else:
            found.append(block)
        i = end + 1
    return found


def unrunnable(page: Path) -> list[str]:
    """Blocks that are neither run, a file, nor marked ``not run``: ``page:line lang``."""
    bad = []
    for b in blocks(page):
        is_file = b.lang == "mlir" and FILE.match(b.text.split("\n")[0])
        if b.skipped or b.lang in RUNNABLE or is_file:
            continue
        bad.append(f"{page.name}:{b.line} ```{b.lang}")
    return bad


def scratch(repo: Path, where: Path) -> Path:
    """``where`` with a link to each top-level entry of ``repo`` but ``.git``."""
    for entry in repo.iterdir():
        if entry.name != ".git" and not (where / entry.name).exists():
            (where / entry.name).symlink_to(entry)
    return where


def run_page(page: Path, where: Path) -> list[str]:
    """Run every block of ``page`` in ``where``; the mismatches, each with its line."""
    todo = [b for b in blocks(page) if not b.skipped]
    for b in todo:
        if b.lang == "mlir" and (name := FILE.match(b.text.split("\n")[0])):
            (where / name.group(1)).write_text(b.text)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    failures = []
    checker = doctest.OutputChecker()
    old = Path.cwd()
    os.chdir(where)
    try:
        for b in todo:
            if b.lang not in RUNNABLE:
                continue
            out, ok = (_python if b.lang == "python" else _sh)(b, page, namespace)
            where_ = f"{page.name}:{b.line}"
            if b.expected is None:
                if not ok:
                    failures.append(f"{where_}: failed\n{out}")
                continue
            want = _tidy(b.expected)
            if not checker.check_output(want, _tidy(out), doctest.ELLIPSIS):
                failures.append(f"{where_}: printed\n{out}\nwhere the page says\n{b.expected}")
    finally:
        os.chdir(old)
    return failures


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


def _python(block: Block, page: Path, namespace: dict[str, Any]) -> tuple[str, bool]:
    buffer = io.StringIO()
    name = f"{page}:{block.line}"
    # the block's source, as IPython keeps a cell's, so that inspect finds it
    # (sparsecomp.kernel reads a function's source)
    linecache.cache[name] = (len(block.text), None, block.text.splitlines(True), name)
    code = compile(block.text, name, "exec")
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            exec(code, namespace)
    except Exception as error:  # the page shows what a user would see
        kind = type(error)
        module = "" if kind.__module__ == "builtins" else kind.__module__ + "."
        if block.expected is None:
            buffer.write("".join(traceback.format_exception(error)))
        else:
            buffer.write(f"{module}{kind.__qualname__}: {error}\n")
        return buffer.getvalue(), False
    return buffer.getvalue(), True


def _sh(block: Block, page: Path, namespace: dict[str, Any]) -> tuple[str, bool]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=600,
    )
    return done.stdout, done.returncode == 0
