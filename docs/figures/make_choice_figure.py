"""Draw docs/figures/choices.png: the layouts ``choose`` picks for three matrices.

Three matrices of ``benchmarks/matrices.py``-like structure at full size (a
4096^2 weight matrix with 90% of its 16x16 blocks pruned, a 2^16-row band of
17 diagonals, an R-MAT graph of 2^14 vertices), each given to
``sparsecomp.formats.choose`` for SpMV with the development machine's
coefficients (``choice.DEFAULT``, so that the picture does not depend on
the machine that draws it), packed in the chosen layout and drawn in its
top-left 96 x 96 corner: each nonzero in the color of the part that holds
it, block layouts with their stored blocks outlined. The title of each
panel is the choice and its predicted gain; the PNG's ``Description``
repeats them, and a test checks them against ``choose`` today. Run from
the repository root::

    .venv/bin/python docs/figures/make_choice_figure.py [output.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sparsecomp import sparsify
from sparsecomp.formats import Choice, Composable, SparseTensor, choose
from sparsecomp.formats.choice import DEFAULT

OUT = Path(__file__).resolve().parent / "choices.png"
CORNER = 96


def matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(4)
    weights = rng.standard_normal((4096, 4096)).astype(np.float32)
    blocks = sp.csr_matrix(sparsify(weights, "block_fraction:16x16:0.9"))
    n = 1 << 16
    band = sp.diags([np.ones(n - abs(d)) for d in range(-8, 9)], list(range(-8, 9)), format="csr")
    scale = 14
    edges = 16 << scale
    rows = np.zeros(edges, np.int64)
    cols = np.zeros(edges, np.int64)
    for bit in range(scale):  # R-MAT quadrants with a, b, c = 0.57, 0.19, 0.19
        r = rng.random(edges)
        down = r >= 0.76
        right = ((r >= 0.57) & (r < 0.76)) | (r >= 0.95)
        rows |= down.astype(np.int64) << bit
        cols |= right.astype(np.int64) << bit
    rmat = sp.csr_matrix((np.ones(edges, np.float32), (rows, cols)), shape=(1 << scale,) * 2)
    rmat.sum_duplicates()
    return {"block-pruned weights": blocks, "band of 17 diagonals": band, "R-MAT graph": rmat}


def choices(found: dict[str, sp.csr_matrix]) -> dict[str, Choice]:
    """Each matrix's SpMV choice under the development machine's coefficients."""
    return {
        name: choose(a.astype(np.float32), op="spmv", coefficients=DEFAULT)
        for name, a in found.items()
    }


def description(chosen: dict[str, Choice]) -> str:
    """The PNG's ``Description``: each matrix's choice and its predicted gain (a test
    compares it with what ``choose`` picks today)."""
    return "; ".join(
        f"{name}: {c.layout} {c.estimates['csr'] / c.estimates[c.layout]:.2f}x"
        for name, c in chosen.items()
    )


def main(argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    out = Path(argv[0]) if argv else OUT
    found = matrices()
    fig, axes = plt.subplots(1, len(found), figsize=(5 * len(found), 5.4), dpi=100)
    colors = plt.get_cmap("tab10")
    chosen = choices(found)
    for ax, (name, a) in zip(axes, found.items(), strict=True):
        choice = chosen[name]
        corner = sp.csr_matrix(a[:CORNER, :CORNER], dtype=np.float32)
        tensor = SparseTensor.from_scipy(corner, choice.layout)
        parts = tensor.parts if isinstance(tensor.layout, Composable) else [tensor]
        for i, part in enumerate(parts):
            coords, _ = part.to_coo()
            ax.scatter(coords[1], coords[0], s=4, marker="s", color=colors(i % 10))
        if choice.layout.startswith("bsr:"):
            size = int(choice.layout.split(":")[1].split("x")[0])
            coords, _ = tensor.to_coo()
            for r, c in {(int(r) // size, int(c) // size) for r, c in coords.T}:
                box = Rectangle((c * size - 0.5, r * size - 0.5), size, size, fill=False, lw=0.6)
                ax.add_patch(box)
        gain = choice.estimates["csr"] / choice.estimates[choice.layout]
        ax.set_title(f"{name}\n{choice.layout} (predicted {gain:.2f}x CSR)", fontsize=10)
        ax.set_xlim(-1, CORNER)
        ax.set_ylim(CORNER, -1)
        ax.set_aspect("equal")
    fig.suptitle(f"choose(A, op='spmv'): the top-left {CORNER}x{CORNER} of each matrix", y=1.03)
    fig.tight_layout()
    fig.savefig(out, bbox_inches="tight", metadata={"Description": description(chosen)})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
