"""Every ``#sparse_iter`` attribute written out in the docs parses, in today's syntax.

Attributes are found by bracket matching in README.md and docs/*.md; ones
that elide parts (``...``), use placeholders (``<op name>``) or aliases
(``#csr``), and mlir-tblgen's parameter summaries, are skipped. Each
must parse, and MLIR's print of it must parse back to the same attribute.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mlir import ir

from sparsecomp.ir.context import make_context

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
START = re.compile(r"#sparse_iter\.(\w+)<")
ALIAS = re.compile(r"#(?!sparse_iter\.|sparse_tensor\.)[A-Za-z_]")
#: ``<op name>``-style placeholders (an attribute's ``<`` follows its name).
PLACEHOLDER = re.compile(r"(?<![\w.])<[a-z]")


def _end(text: str, i: int) -> int | None:
    depth, in_string = 1, False
    while i < len(text):
        c = text[i]
        if in_string:
            in_string = c != '"' or text[i - 1] == "\\"
        elif c == '"':
            in_string = True
        elif c in "([{<":
            depth += 1
        elif c in ")]}" or (c == ">" and text[i - 1] != "-"):
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def doc_attributes() -> list[tuple[str, str]]:
    """``(place, attribute text)`` of every complete attribute in the docs."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        i = 0
        while match := START.search(text, i):
            end = _end(text, match.end())
            i = match.end()
            if end is None:
                continue
            span = re.sub(r"\s+", " ", text[match.start() : end])
            if "..." in span or "::" in span or ALIAS.search(span) or PLACEHOLDER.search(span):
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(REPO)}:{line}", span))
            i = end
    return found


ATTRIBUTES = doc_attributes()


def test_docs_show_every_attribute_kind() -> None:
    kinds = {START.match(text).group(1) for _, text in ATTRIBUTES}  # type: ignore[union-attr]
    wanted = {"layout", "sparsity", "encoding", "sparsifier", "part", "cpu", "cuda"}
    assert wanted <= kinds


@pytest.mark.parametrize(("place", "text"), ATTRIBUTES, ids=[p for p, _ in ATTRIBUTES])
def test_doc_attribute_parses(place: str, text: str) -> None:
    ctx = _CTX.setdefault("ctx", make_context())
    try:
        attr = ir.Attribute.parse(text, ctx)
    except ir.MLIRError as exc:
        pytest.fail(f"{place}: {text}\n{exc}")
    assert ir.Attribute.parse(str(attr), ctx) == attr


_CTX: dict[str, ir.Context] = {}
