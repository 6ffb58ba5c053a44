"""Markdown tables of ``cpu.py``: times, ratios to a baseline, geomeans, notes."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Cell:
    """One peer on one case: a time in seconds, or a status and its reason."""

    seconds: float | None = None
    status: str = ""  # "n/a", "WRONG", "ABORTED" when seconds is None
    reason: str = ""

    def text(self) -> str:
        return f"{self.seconds * 1e3:.3f}" if self.seconds is not None else self.status


@dataclass
class Row:
    matrix: str
    rows: int
    nnz: int
    cells: dict[str, Cell] = field(default_factory=dict)
    bound: float | None = None  # SpMV bandwidth bound, seconds


def ratio(peer: Cell, base: Cell) -> float | None:
    if peer.seconds is None or base.seconds is None or base.seconds == 0:
        return None
    return peer.seconds / base.seconds


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(title: str, rows: list[Row], peers: list[str], baseline: str) -> str:
    """One op's table: ms per peer, peer/baseline ratios, a geomean row, notes."""
    others = [p for p in peers if p != baseline]
    has_bound = any(r.bound is not None for r in rows)
    head = ["matrix", "rows", "nnz", f"{baseline} ms"]
    for p in others:
        head += [f"{p} ms", f"{p} ratio"]
    if has_bound:
        head += ["bound ms", f"{baseline} / bound"]
    lines = [f"## {title}", "", _line(head), _line(["---"] * 3 + ["---:"] * (len(head) - 3))]
    ratios: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        base = r.cells[baseline]
        cells = [r.matrix, str(r.rows), str(r.nnz), base.text()]
        for p in others:
            x = ratio(r.cells[p], base)
            if x is not None:
                ratios[p].append(x)
            cells += [r.cells[p].text(), _fmt(x)]
        if has_bound:
            bound = Cell(r.bound) if r.bound is not None else Cell(status="-")
            x = ratio(base, bound)
            if x is not None:
                ratios["bound"].append(x)
            cells += [bound.text(), _fmt(x)]
        lines.append(_line(cells))
    geo = ["geomean", "", "", ""]
    for p in others:
        geo += ["", _geo(ratios[p], len(rows))]
    if has_bound:
        geo += ["", _geo(ratios["bound"], len(rows))]
    lines.append(_line(geo))
    lines += ["", *notes(rows, peers)]
    return "\n".join(lines).rstrip() + "\n"


def _geo(values: list[float], total: int) -> str:
    g = geomean(values)
    if g is None:
        return "-"
    return f"**{g:.2f}**" + ("" if len(values) == total else f" ({len(values)}/{total})")


def notes(rows: list[Row], peers: list[str]) -> list[str]:
    """One bullet per (peer, status, reason), naming the matrices it applies to."""
    grouped: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in rows:
        for p in peers:
            c = r.cells[p]
            if c.seconds is None and c.status != "-":
                grouped[(p, c.status, c.reason)].append(r.matrix)
    out = []
    for (p, status, reason), matrices in grouped.items():
        which = "all matrices" if len(matrices) == len(rows) else ", ".join(matrices)
        out.append(f"- {p} {status} ({which}): {reason}")
    return out + ([""] if out else [])


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def summary(
    rows: dict[str, list[Row]], forms: list[str], peers: list[str], bound: str = "bound"
) -> list[str]:
    """Per op and program form: geomean (and worst) of each peer's time over the form's.

    Above 1 the form is faster; the worst case is the smallest ratio. The first
    form's column "form / first" is the other forms' time over the first's: there
    above 1 the form is slower, and the worst case is the largest ratio.
    """
    others = [p for p in peers if p not in forms]
    head = ["op", "form", *(f"{p} / form" for p in others)]
    if len(forms) > 1:
        head.insert(2, f"form / {forms[0]}")
    lines = [_line(head), _line(["---", "---"] + ["---:"] * (len(head) - 2))]
    for label, table_rows in rows.items():
        for form in forms:
            cells = [label, form]
            if len(forms) > 1:
                cells.append(_summary_cell(table_rows, form, forms[0], worst=max))
            cells += [_summary_cell(table_rows, p, form) for p in others]
            lines.append(_line(cells))
    return lines


def form_table(rows: dict[str, list[Row]], ours: str, ours_scipy: str, upstream: str) -> list[str]:
    """Per op: what the program form costs with the operand held alike (``upstream``
    over ``ours_scipy``, both called with the scipy matrix), what the scipy operand
    costs our form (``ours_scipy`` over ``ours``, which takes a packed
    ``SparseTensor``), and both together (``upstream`` over ``ours``). Geomean over
    the matrices (worst, the largest ratio, in parentheses; below 1: cheaper)."""
    pairs = [(upstream, ours_scipy), (ours_scipy, ours), (upstream, ours)]
    head = ["op", f"{upstream} / {ours_scipy}", f"{ours_scipy} / {ours}", f"{upstream} / {ours}"]
    lines = [_line(head), _line(["---"] + ["---:"] * 3)]
    for label, table_rows in rows.items():
        cells = [label]
        for peer, base in pairs:
            values = _ratios(table_rows, peer, base)
            g = geomean(values)
            cells.append("-" if g is None else f"{g:.2f} (worst {max(values):.2f})")
        lines.append(_line(cells))
    return lines


def _ratios(rows: list[Row], peer: str, base: str) -> list[float]:
    """``peer``'s time over ``base``'s on every row where both ran."""
    return [x for r in rows if (x := ratio(r.cells[peer], r.cells[base])) is not None]


def _summary_cell(
    rows: list[Row], peer: str, base: str, worst: Callable[[list[float]], float] = min
) -> str:
    values = _ratios(rows, peer, base)
    if not values or peer == base:
        return "-"
    g = geomean(values)
    assert g is not None
    return f"{g:.2f} (worst {worst(values):.2f})"
