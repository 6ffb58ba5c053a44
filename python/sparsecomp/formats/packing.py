"""What a level packer sees and what it gives back (:mod:`.storage`, :mod:`.structured`).

Kept apart from both so that :mod:`.storage` (which runs the packers) and
:mod:`.structured` (the n:m packer) share these types without importing each
other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparsecomp.formats.layout import Layout


@dataclass(frozen=True)
class PackState:
    """What a level packer sees: the layout, shapes, and sorted level coordinates."""

    layout: Layout
    shape: tuple[int, ...]
    lvl_shape: tuple[int, ...]
    lvl: np.ndarray  # (n_levels, nnz) int64, sorted lexicographically

    def entry_dims(self, entry: int) -> tuple[int, ...]:
        """The dimension coordinates of sorted entry ``entry``."""
        dims = self.layout.dim_to_lvl.to_dims(self.lvl[:, entry : entry + 1])
        return tuple(int(d) for d in dims[:, 0])

    def describe_parent(self, lvl: int, entry: int) -> str:
        """Words naming the parent position at level ``lvl`` of sorted entry ``entry``."""
        prefix = tuple(int(c) for c in self.lvl[:lvl, entry])
        first = self.layout.dim_to_lvl.results[0]
        if self.layout.rank == 2 and lvl == 1 and first.op == "id":
            return f"{('row', 'column')[first.dim]} {prefix[0]}"
        return f"the parent at level coordinates {prefix}"


@dataclass(frozen=True)
class LevelOut:
    """One packed level: its buffers (int64 unless ``final``) and each entry's position."""

    pos: np.ndarray | None
    crd: np.ndarray | None
    parent: np.ndarray
    nparents: int
    final: bool = False  # crd is already in its stored form (packed n:m metadata)
