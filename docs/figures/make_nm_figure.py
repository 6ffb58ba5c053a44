"""Draw docs/figures/nm_metadata.png: the PTX ``mma.sp`` 2:4 metadata layout.

Everything drawn is computed by :mod:`sparsecomp.formats.nm` (which word and
bits hold each 4-column group of a tile, which lane passes each word), so the
picture follows the code. Run from the repository root::

    .venv/bin/python docs/figures/make_nm_figure.py            # writes the PNG
    .venv/bin/python docs/figures/make_nm_figure.py --tables   # prints the bit table

The bit table printed by ``--tables`` is the one in docs/nm-metadata.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sparsecomp.formats import mma_sp

HERE = Path(__file__).resolve().parent

OUT = HERE / "nm_metadata.png"


def cell_map(shape: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (row, group) of one tile: the word index, and the low/high bit of its nibble."""
    layout = mma_sp.mma_sp_bit_layout(shape)  # (W, 16 fields, (row, group, slot))
    k_groups = layout[..., 1].max() + 1
    word = np.full((mma_sp.TILE_ROWS, k_groups), -1)
    low = np.full((mma_sp.TILE_ROWS, k_groups), 99)
    high = np.full((mma_sp.TILE_ROWS, k_groups), -1)
    w, f = np.meshgrid(np.arange(layout.shape[0]), np.arange(16), indexing="ij")
    row, group = layout[..., 0], layout[..., 1]
    word[row, group] = w
    np.minimum.at(low, (row, group), 2 * f)
    np.maximum.at(high, (row, group), 2 * f + 1)
    return word, low, high


def _relative(word: int, row: int, shape: str) -> str:
    g = int(mma_sp.mma_sp_word_lanes(shape)[word]) >> 2
    return "g" if row == g else "g+8"


def table_text() -> str:
    """The bits -> (row, group, slot) table for one word of each shape, as Markdown."""
    k16 = mma_sp.mma_sp_bit_layout("m16n8k16")
    k32 = mma_sp.mma_sp_bit_layout("m16n8k32")
    # The tables of every word agree with word 0 (k16) / words 0, 1 (k32) up to the
    # quad index g; check that before printing the generic form.
    for shape, table in (("m16n8k16", k16), ("m16n8k32", k32)):
        lanes = mma_sp.mma_sp_word_lanes(shape)
        shifted = table.copy()
        shifted[..., 0] -= (lanes >> 2)[:, None]
        period = table.shape[0] // 8
        assert (shifted == np.tile(shifted[:period], (8, 1, 1))).all()
    lines = [
        "| bits | m16n8k16, word g: row, group, slot | m16n8k32, word 2g | m16n8k32, word 2g+1 |",
        "| --- | --- | --- | --- |",
    ]
    for f in range(15, -1, -1):
        cells = []
        for shape, table, w in (("m16n8k16", k16, 0), ("m16n8k32", k32, 0), ("m16n8k32", k32, 1)):
            row, group, slot = (int(x) for x in table[w, f])
            cells.append(f"{_relative(w, row, shape)}, {group}, {slot}")
        lines.append(f"| {2 * f + 1}:{2 * f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draw(path: Path = OUT) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    cmap = plt.get_cmap("tab20")
    fig = plt.figure(figsize=(16, 13), dpi=110)
    grid = fig.add_gridspec(3, 2, height_ratios=[3.2, 0.8, 0.8], width_ratios=[1, 2])
    for col, shape in enumerate(mma_sp.MMA_SP_SHAPES):
        ax = fig.add_subplot(grid[0, col])
        word, low, high = cell_map(shape)
        lanes = mma_sp.mma_sp_word_lanes(shape)
        k_groups = word.shape[1]
        for r in range(mma_sp.TILE_ROWS):
            for g in range(k_groups):
                w = word[r, g]
                ax.add_patch(
                    Rectangle((4 * g, r), 4, 1, facecolor=cmap(w % 20), edgecolor="white", lw=1.5)
                )
                ax.text(
                    4 * g + 2,
                    r + 0.5,
                    f"T{lanes[w]} [{high[r, g]}:{low[r, g]}]",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
        ax.set_xlim(0, 4 * k_groups)
        ax.set_ylim(mma_sp.TILE_ROWS, 0)
        ax.set_xticks(np.arange(0, 4 * k_groups + 1, 4))
        ax.set_yticks(np.arange(mma_sp.TILE_ROWS) + 0.5, [str(r) for r in range(mma_sp.TILE_ROWS)])
        ax.set_xlabel("column of A in the k-tile (4-column groups)")
        ax.set_ylabel("row of A in the 16-row tile")
        ax.set_title(
            f"mma.sp {shape} (.f16/.bf16), selector 0:\n"
            "lane whose metadata word holds each group, and its nibble's bits"
        )
        ax.set_aspect("equal" if shape == "m16n8k16" else "auto")

    # One word: word 0 of an m16n8k32 tile (lane 0), all 32 bits.
    ax = fig.add_subplot(grid[1, :])
    table = mma_sp.mma_sp_bit_layout("m16n8k32")[0]
    for f in range(16):
        row, group, slot = (int(x) for x in table[f])
        x = 15 - f  # bit 31 on the left
        shade = ("#9ecae1", "#c6dbef") if row < 8 else ("#fdae6b", "#fdd0a2")
        ax.add_patch(Rectangle((2 * x, 0), 2, 1, facecolor=shade[slot], edgecolor="black"))
        ax.text(2 * x + 1, 0.62, f"row {row}, grp {group}", ha="center", va="center", fontsize=8)
        ax.text(2 * x + 1, 0.3, f"slot {slot}", ha="center", va="center", fontsize=8)
        ax.text(2 * x + 1, 1.15, f"{2 * f + 1}:{2 * f}", ha="center", va="center", fontsize=8)
    ax.set_xlim(0, 32)
    ax.set_ylim(-0.2, 1.4)
    ax.axis("off")
    ax.set_title(
        "the 32 bits of word 0 of an m16n8k32 tile (lane 0): bits 2f+1:2f hold the index "
        "of slot s (0 = smaller) of row r, group g; rows 0..7 in bits 0..15, rows 8..15 in 16..31"
    )

    # Storage order: the words of one tile, in memory order, and the lane that uses each.
    ax = fig.add_subplot(grid[2, :])
    for y, shape in enumerate(mma_sp.MMA_SP_SHAPES):
        lanes = mma_sp.mma_sp_word_lanes(shape)
        loads = mma_sp.mma_sp_lane_words(shape)
        for w, lane in enumerate(lanes):
            ax.add_patch(
                Rectangle((2 * w, -1.6 * y), 2, 1, facecolor=cmap(w % 20), edgecolor="black")
            )
            also = ",".join(str(x) for x in np.flatnonzero(loads == w) if x != lane)
            ax.text(2 * w + 1, 1.12 - 1.6 * y, f"w{w}", ha="center", va="center", fontsize=7)
            ax.text(2 * w + 1, 0.62 - 1.6 * y, f"T{lane}", ha="center", va="center", fontsize=8)
            ax.text(2 * w + 1, 0.28 - 1.6 * y, f"({also})", ha="center", va="center", fontsize=6)
        ax.text(-0.3, 0.5 - 1.6 * y, shape, ha="right", va="center", fontsize=9)
    ax.set_xlim(-5, 32)
    ax.set_ylim(-1.8, 1.4)
    ax.axis("off")
    ax.set_title(
        "storage order of one tile's words (to_mma_sp): word w is the metadata operand of "
        "lane T (selector 0); the lanes in parentheses load a copy of it"
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str]) -> int:
    if "--tables" in argv:
        print(table_text())
        return 0
    draw()
    print(f"wrote {OUT.relative_to(HERE.parents[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
