"""Draw docs/figures/cpu_ratios.png from the CPU benchmark run in docs/benchmarks.md.

One panel per table of that run (SpMV, SpMM K=32 and K=128, SDDMM, SpGEMM): per
matrix, each peer's time over sparsecomp's (``P ratio`` columns; above 1,
sparsecomp is faster), on a log scale, with the upstream-syntax form of
sparsecomp (``sparsecomp-up``, and ``sparsecomp-up-out`` called with
``out=``) and our form called with the scipy matrix (``sparsecomp-scipy``)
among them. The PNG's ``Description`` holds the SHA-256 of the
tables it was drawn from, so a test can tell when the run in
docs/benchmarks.md changed and the figure did not. Run from the
repository root::

    .venv/bin/python docs/figures/make_cpu_figure.py [docs/benchmarks.md] [output.png]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mdtable
from mdtable import fingerprint

OUT = Path(__file__).resolve().parent / "cpu_ratios.png"
#: the tables drawn: the CPU benchmark's op tables (their "## " titles start so)
TITLES = ("SpMV", "SpMM", "SDDMM", "SpGEMM")
PEERS = ("sparsecomp-up", "sparsecomp-up-out", "scipy", "torch", "upstream", "sparsecomp-scipy")


def cpu_tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Title -> rows (column -> cell) of the op tables of the first ``# CPU benchmark``
    section of ``markdown``."""
    section = markdown.split("\n# ", 1)[0] if markdown.startswith("# CPU") else ""
    tables: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"\n## ", section)[1:]:
        title, _, body = block.partition("\n")
        if not title.startswith(TITLES):
            continue
        rows = mdtable.parse(body.splitlines())
        if not rows:
            continue
        tables[title] = [r for r in rows if r.get("matrix") not in ("geomean", None)]
    return tables


def _number(cell: str | None) -> bool:
    """Whether a ratio cell holds a number (not ``-`` or empty)."""
    return cell is not None and cell.strip("*") not in ("-", "")


def draw(tables: dict[str, list[dict[str, str]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tables), 1, figsize=(13, 3.2 * len(tables)), squeeze=False)
    for ax, (title, rows) in zip(axes[:, 0], tables.items(), strict=True):
        names = [r["matrix"] for r in rows]
        peers = [p for p in PEERS if any(_number(r.get(f"{p} ratio")) for r in rows)]
        width = 0.8 / max(len(peers), 1)
        for k, peer in enumerate(peers):
            xs, ys = [], []
            for i, r in enumerate(rows):
                cell = r.get(f"{peer} ratio")
                if _number(cell):
                    xs.append(i + (k - (len(peers) - 1) / 2) * width)
                    ys.append(float(cell.strip("*")))  # type: ignore[union-attr]
            ax.bar(xs, ys, width, label=peer, color=f"C{PEERS.index(peer)}")  # one color a peer
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("time / sparsecomp's")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, ncol=len(peers), loc="upper left")
    fig.suptitle("CPU benchmark: each peer's time over sparsecomp's (above 1: sparsecomp faster)")
    fig.tight_layout()
    fig.savefig(out, dpi=90, metadata={"Description": fingerprint(tables)})
    plt.close(fig)


def main(argv: list[str]) -> int:
    return mdtable.figure_main(argv, OUT, cpu_tables, draw, "no CPU benchmark tables")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
