"""Draw docs/figures/mkl_ratios.png from the MKL run in docs/benchmarks.md (issue 44).

One panel per table of the section "Against Intel oneMKL": per matrix, MKL's
time over ours (above 1: sparsecomp is faster), on a log scale, computed from
the tables' ``ms`` columns for like pairs:

* SpMV and SpMM: ``mkl-opt`` (MKL's inspector-executor, optimized) over
  ``sparsecomp`` (CSR) and over ``sparsecomp-prepared`` (the layout
  ``exe.prepare`` chose), and the naive ``mkl`` over ``sparsecomp``;
* SpGEMM: rows unordered (``mkl-opt`` over ``sparsecomp-unsorted``) and
  rows ordered (``mkl-opt-sorted`` over ``sparsecomp``).

The issue's targets (1.5x for SpMV and SpGEMM, 2x for SpMM) are drawn as
dashed lines. The PNG's ``Description`` holds the SHA-256 of the tables it
was drawn from, so a test can tell when the run changed and the figure did
not. Run from the repository root::

    .venv/bin/python docs/figures/make_mkl_figure.py [docs/benchmarks.md] [output.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mdtable
from mdtable import fingerprint

OUT = Path(__file__).resolve().parent / "mkl_ratios.png"
SECTION = "## Against Intel oneMKL"
#: (MKL's peer, ours): the like pairs drawn, where a table has both columns
PAIRS = (
    ("mkl-opt", "sparsecomp"),
    ("mkl-opt", "sparsecomp-prepared"),
    ("mkl", "sparsecomp"),
    ("mkl-opt", "sparsecomp-unsorted"),
    ("mkl-opt-sorted", "sparsecomp"),
)
#: issue 44's targets against optimized MKL, by the table title's first word
TARGETS = {"SpMV": 1.5, "SpMM": 2.0, "SpGEMM": 1.5}


def mkl_tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Title -> rows (column -> cell) of the ``### `` tables of the MKL section."""
    if SECTION not in markdown:
        return {}
    section = markdown.split(SECTION, 1)[1]
    section = section.split("\n## ", 1)[0]
    tables: dict[str, list[dict[str, str]]] = {}
    for block in section.split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        rows = mdtable.parse(body.splitlines())
        if rows:
            tables[title.strip()] = [r for r in rows if r.get("matrix") not in ("geomean", None)]
    return tables


def pairs(rows: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The like pairs a table holds: unordered SpGEMM is not set beside ordered results."""
    have = set(rows[0]) if rows else set()
    found = [(m, o) for m, o in PAIRS if f"{m} ms" in have and f"{o} ms" in have]
    if ("mkl-opt", "sparsecomp-unsorted") in found:  # SpGEMM: MKL's unordered rows
        found = [(m, o) for m, o in found if (m, o) != ("mkl-opt", "sparsecomp")]
        found = [(m, o) for m, o in found if m != "mkl"]
    return found


def _ms(cell: str | None) -> float | None:
    try:
        return float((cell or "").strip("*"))
    except ValueError:
        return None  # n/a, WRONG


def ratios(rows: list[dict[str, str]], mkl: str, ours: str) -> list[float | None]:
    """Per row, MKL's time over ours (None where either did not run)."""
    found: list[float | None] = []
    for r in rows:
        theirs, mine = _ms(r.get(f"{mkl} ms")), _ms(r.get(f"{ours} ms"))
        found.append(theirs / mine if theirs and mine else None)
    return found


def draw(tables: dict[str, list[dict[str, str]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, axes = plt.subplots(len(tables), 1, figsize=(12, 3.0 * len(tables)), squeeze=False)
    for ax, (title, rows) in zip(axes[:, 0], tables.items(), strict=True):
        names = [r["matrix"] for r in rows]
        drawn = pairs(rows)
        width = 0.8 / max(len(drawn), 1)
        for k, (mkl, ours) in enumerate(drawn):
            xs, ys = [], []
            for i, x in enumerate(ratios(rows, mkl, ours)):
                if x is not None:
                    xs.append(i + (k - (len(drawn) - 1) / 2) * width)
                    ys.append(x)
            color = f"C{PAIRS.index((mkl, ours))}"
            ax.bar(xs, ys, width, label=f"{mkl} / {ours}", color=color)
        ax.axhline(1.0, color="black", linewidth=0.8)
        target = TARGETS.get(title.split()[0])
        if target:
            ax.axhline(target, color="gray", linewidth=0.8, linestyle="--", label="target")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("MKL time / ours")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, ncol=len(drawn) + 1, loc="upper left")
    fig.suptitle("Against Intel oneMKL: MKL's time over sparsecomp's (above 1: sparsecomp faster)")
    fig.tight_layout()
    fig.savefig(out, dpi=90, metadata={"Description": fingerprint(tables)})
    plt.close(fig)


def main(argv: list[str]) -> int:
    return mdtable.figure_main(argv, OUT, mkl_tables, draw, f"no '{SECTION}' tables")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
