"""Markdown pipe tables as rows of ``{column: cell}``, read and written, for the figure
scripts that draw from the tables in docs/ (and write them)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

Tables = dict[str, list[dict[str, str]]]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse(lines: list[str]) -> list[dict[str, str]]:
    """The rows of a table given as its lines (header, separator, rows); other lines
    are skipped."""
    lines = [ln for ln in lines if ln.startswith("|")]
    if len(lines) < 2:
        return []
    head = _cells(lines[0])
    return [dict(zip(head, _cells(ln), strict=False)) for ln in lines[2:]]


def render(rows: list[dict[str, str]]) -> str:
    """``rows`` as a table, the columns of the first row in order."""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(r[h] for h in head) + " |" for r in rows]
    return "\n".join(lines)


def fingerprint(tables: Tables) -> str:
    """SHA-256 of ``tables`` (title -> rows): a drawn figure's ``Description``, so that a
    test can tell when the tables changed and the figure did not."""
    text = repr(sorted((t, [sorted(r.items()) for r in rows]) for t, rows in tables.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def figure_main(
    argv: list[str],
    default_out: Path,
    read: Callable[[str], Tables],
    draw: Callable[[Tables, Path], None],
    missing: str,
) -> int:
    """``script [source.md] [output.png]``: draw the tables ``read`` finds in the source
    (docs/benchmarks.md by default); exit status 1 with ``missing`` where it finds none."""
    source = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "benchmarks.md"
    out = Path(argv[1]) if len(argv) > 1 else default_out
    tables = read(source.read_text())
    if not tables:
        print(f"{missing} in {source}", file=sys.stderr)
        return 1
    draw(tables, out)
    print(out)
    return 0
