"""Draw docs/figures/hyb.png: a power-law matrix split by the hyb layout.

The matrix is packed with ``SparseTensor.from_scipy(m, "hyb:2:8")``: two
column partitions, ELL buckets of widths 1, 2, 4 and 8 in each, and a CSR
remainder for longer rows. Each nonzero is drawn in the color of the part
that holds it, read back from the parts' own buffers, so the picture is what
the code stores. Run from the repository root::

    .venv/bin/python docs/figures/make_hyb_figure.py [output.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sparsecomp.formats import Composable, SparseTensor

OUT = Path(__file__).resolve().parent / "hyb.png"
SIZE = 96


def sample_matrix(seed: int = 3) -> sp.csr_matrix:
    """Rows with Zipf-distributed lengths, so every bucket and the rest get used."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.zipf(1.6, SIZE), SIZE // 2)
    rows = np.repeat(np.arange(SIZE), lengths)
    cols = np.concatenate([rng.choice(SIZE, n, replace=False) for n in lengths])
    return sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(SIZE, SIZE))


def part_labels(layout: Composable) -> list[str]:
    labels = []
    for part in layout.parts:
        if part.rule == "ell_bucket":
            p, parts, _, hi = part.params
            labels.append(f"columns {p + 1}/{parts}: ELL width {hi}")
        else:
            labels.append("rest: CSR")
    return labels


def main(argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(argv[0]) if argv else OUT
    tensor = SparseTensor.from_scipy(sample_matrix(), "hyb:2:8")
    assert isinstance(tensor.layout, Composable)
    fig, ax = plt.subplots(figsize=(7, 6), dpi=110)
    colors = plt.get_cmap("tab10")
    for i, (part, label) in enumerate(zip(tensor.parts, part_labels(tensor.layout), strict=True)):
        coords, _ = part.to_coo()
        if coords.shape[1]:
            marker = "s" if i < len(tensor.parts) - 1 else "x"
            ax.scatter(coords[1], coords[0], s=9, marker=marker, color=colors(i % 10), label=label)
    ax.axvline(SIZE / 2 - 0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlim(-1, SIZE)
    ax.set_ylim(SIZE, -1)
    ax.set_aspect("equal")
    ax.set_title(f"hyb:2:8 of a {SIZE}x{SIZE} power-law matrix ({tensor.nnz} nonzeros)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out, bbox_inches="tight")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
