"""Markdown pipe tables as rows of ``{column: cell}``, read and written, for the figure
scripts that draw from the tables in docs/ (and write them)."""

from __future__ import annotations


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
