"""Row partitions of a CSR matrix balanced by nonzeros.

A partition is a range of rows and a range of stored entries. Boundaries are
placed at ``k * nnz / parts`` entries: on the row boundary nearest to that
point where one is close (within ``slack`` of a partition's share), else
inside the row, which is then *split* between two partitions. A power-law
row with more entries than a partition's share is split over several, so no
partition holds much more than its share. The kernels run on each
partition's rows; where a row is split, the partitions' results for it are
summed when the results are put together (:func:`owners`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Part:
    """Rows ``[row_start, row_stop)`` and stored entries ``[nz_start, nz_stop)``."""

    row_start: int
    row_stop: int
    nz_start: int
    nz_stop: int

    @property
    def rows(self) -> int:
        return self.row_stop - self.row_start

    @property
    def nnz(self) -> int:
        return self.nz_stop - self.nz_start


def balanced(indptr: np.ndarray, parts: int, slack: float = 0.05) -> list[Part]:
    """``parts`` partitions (fewer where the matrix has fewer rows and entries)
    of the CSR matrix with row pointers ``indptr``, each holding about
    ``nnz / parts`` entries (see the module)."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    indptr = np.asarray(indptr, dtype=np.int64)
    m, nnz = indptr.size - 1, int(indptr[-1])
    if nnz == 0:  # rows alone
        edges = np.linspace(0, m, min(parts, max(m, 1)) + 1).round().astype(np.int64)
        return [Part(int(a), int(b), 0, 0) for a, b in itertools.pairwise(edges)]
    share = nnz / parts
    cuts: list[tuple[int, int]] = [(0, 0)]  # (row, nz): a split cut lies inside its row
    for k in range(1, parts):
        target = round(k * share)
        row = int(np.searchsorted(indptr, target, side="right")) - 1  # the row holding it
        near = min((row, row + 1), key=lambda r: abs(int(indptr[min(r, m)]) - target))
        if abs(int(indptr[min(near, m)]) - target) <= slack * share:
            cut = (near, int(indptr[min(near, m)]))
        else:
            cut = (row, target)
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append((m, nnz))
    out = []
    for (r0, z0), (r1, z1) in itertools.pairwise(cuts):
        split_end = z1 > int(indptr[r1]) if r1 < m else False
        out.append(Part(r0, r1 + 1 if split_end else r1, z0, z1))
    return [p for p in out if p.rows or p.nnz]


def local_indptr(indptr: np.ndarray, part: Part) -> np.ndarray:
    """The row pointers of ``part`` alone (its first entry at 0)."""
    ptr = np.asarray(indptr[part.row_start : part.row_stop + 1], dtype=np.int64)
    return np.clip(ptr, part.nz_start, part.nz_stop) - part.nz_start


def owners(parts: list[Part], m: int) -> list[tuple[int, int, list[int]]]:
    """The output chunks of a row-wise result: ``(row_start, row_stop, parts)``,
    one per partition, each chunk's rows those from its partition's first row to
    the next partition's first; ``parts`` lists the partitions whose rows fall in
    it (itself, and those before it that end in a split row inside it)."""
    chunks = []
    for k, p in enumerate(parts):
        stop = parts[k + 1].row_start if k + 1 < len(parts) else m
        inside = [j for j in range(k + 1) if parts[j].row_stop > p.row_start and j != k]
        chunks.append((p.row_start, stop, [*inside, k]))
    return chunks
