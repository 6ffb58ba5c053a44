"""Cheap statistics of a sparse matrix, for choosing its layout (:mod:`.choice`).

Everything here is linear in the number of rows or in a sample of the
nonzeros, never in all of them: :func:`matrix_stats` on a 10M-nonzero CSR
matrix takes a few tens of milliseconds.

* **Row lengths** come exactly from the row pointers (``indptr``): their
  histogram gives the slots and rows of every ELL bucket of a ``hyb``
  layout and the rows its CSR rest keeps.
* **Block statistics** for square blocks of 2, 3, 4, 6, 8 and 16 come from a
  sample of aligned 48-row groups (about :data:`SAMPLE_ENTRIES` nonzeros),
  scaled to the whole matrix: the number of nonzero blocks (BSR's stored
  blocks) and how many nonzeros sit in blocks holding at least a quarter of
  their entries (what ``bsr+csr``'s block part takes).
* **Column reuse**: in the same sample, the distinct columns of each
  16-row group per nonzero: how often a kernel gathers a dense row that
  nearby rows did not already bring into cache.
* **n:m**: whether every group of ``m`` consecutive columns of a row holds
  at most ``n`` nonzeros, looked for only where the layout's slots would be
  at least half full, and checked exactly (vectorized) only where the
  sample says it may hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Nonzeros the block sample aims at.
SAMPLE_ENTRIES = 200_000
#: Square block sizes whose statistics are gathered (3 and 6: the node blocks of FEM
#: matrices with 3 unknowns a node, as bcsstk16's, whose 3x3 blocks are 98% full).
BLOCK_SIZES = (2, 3, 4, 6, 8, 16)
#: Rows of the aligned groups the sample is made of: whole blocks of every size.
SAMPLE_GROUP = math.lcm(*BLOCK_SIZES)
#: Rows of the groups whose distinct columns measure column reuse.
REUSE_ROWS = 16
#: n:m patterns checked.
NM_PATTERNS = ((2, 4), (1, 2), (1, 4))
#: n:m is looked for only where its slots would be at least this full.
NM_MIN_FILL = 0.5


@dataclass(frozen=True)
class BlockStats:
    """Estimated block counts for R x R blocks (scaled from the sample)."""

    size: int
    #: nonzero R x R blocks (BSR's stored blocks)
    blocks: float
    #: blocks holding at least ``max(1, R*R // 4)`` nonzeros, and the nonzeros in them
    dense_blocks: float
    dense_entries: float


@dataclass(frozen=True)
class MatrixStats:
    """What the cost model reads (see the module)."""

    shape: tuple[int, int]
    nnz: int
    #: ``row_lengths_hist[k]`` rows have exactly ``k`` nonzeros (k up to the longest row)
    row_lengths_hist: np.ndarray
    blocks: dict[int, BlockStats] = field(default_factory=dict)
    #: the n:m patterns that hold for every row
    nm: tuple[tuple[int, int], ...] = ()
    seconds: float = 0.0
    #: distinct columns per nonzero within aligned 16-row groups (sampled): about 1
    #: where rows share no columns (each gathered dense row is new), small for bands
    #: and blocks (rows nearby gather the same dense rows)
    column_reuse_miss: float = 1.0

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def max_row(self) -> int:
        return len(self.row_lengths_hist) - 1

    @property
    def density(self) -> float:
        cells = self.shape[0] * self.shape[1]
        return self.nnz / cells if cells else 0.0

    def fill(self, size: int) -> float:
        """The fraction of BSR ``size x size``'s stored values that are nonzeros."""
        stats = self.blocks[size]
        return self.nnz / (stats.blocks * size * size) if stats.blocks else 1.0

    def rows_between(self, lo: int, hi: int) -> tuple[int, int]:
        """``(rows, nonzeros)`` of the rows with more than ``lo`` and at most ``hi`` entries."""
        hist = self.row_lengths_hist
        hi = min(hi, len(hist) - 1)
        if hi <= lo:
            return 0, 0
        counts = hist[lo + 1 : hi + 1]
        lengths = np.arange(lo + 1, hi + 1)
        return int(counts.sum()), int((counts * lengths).sum())


def matrix_stats(A: Any, seed: int = 0, nm: bool = True) -> MatrixStats:
    """:class:`MatrixStats` of a scipy.sparse matrix (or anything ``scipy.sparse.csr_array``
    takes); CSR input is read as it is, other formats are converted once. ``nm=False``
    skips the n:m patterns (``nm`` is then empty)."""
    import time

    import scipy.sparse as sp  # type: ignore[import-untyped]

    start = time.perf_counter()
    if not (sp.issparse(A) and A.format == "csr"):
        A = sp.csr_matrix(A)
    m, n = (int(d) for d in A.shape)
    indptr = np.asarray(A.indptr, dtype=np.int64)
    lengths = np.diff(indptr)
    hist = np.bincount(lengths) if m else np.zeros(1, np.int64)
    nnz = int(indptr[-1]) if m else 0
    rng = np.random.default_rng(seed)
    rows = _sample_rows(indptr, m, nnz, rng)
    sample = _gather(A.indices, indptr, rows)
    blocks = _block_stats(*sample, nnz)
    patterns = _nm_patterns(A.indices, indptr, lengths, n, sample) if nnz and nm else ()
    miss = _reuse_miss(*sample)
    return MatrixStats((m, n), nnz, hist, blocks, patterns, time.perf_counter() - start, miss)


def _reuse_miss(r: np.ndarray, c: np.ndarray) -> float:
    """Distinct (16-row group, column) pairs per sampled nonzero."""
    if r.size == 0:
        return 1.0
    keys = np.sort((r // REUSE_ROWS) * (int(c.max()) + 1) + c)
    return float((1 + np.count_nonzero(np.diff(keys))) / r.size)


def _sample_rows(indptr: np.ndarray, m: int, nnz: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices of randomly chosen aligned groups of :data:`SAMPLE_GROUP` rows holding
    about SAMPLE_ENTRIES."""
    group = SAMPLE_GROUP
    groups = -(-m // group)
    if nnz <= SAMPLE_ENTRIES or groups <= 1:
        return np.arange(m)
    take = max(1, min(groups, int(groups * SAMPLE_ENTRIES / nnz)))
    chosen = np.sort(rng.choice(groups, take, replace=False))
    rows = (chosen[:, None] * group + np.arange(group)[None, :]).ravel()
    return rows[rows < m]


def _gather(
    indices: np.ndarray, indptr: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(row, column)`` of every nonzero of ``rows``."""
    starts, ends = indptr[rows], indptr[rows + 1]
    counts = ends - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    positions = np.arange(total) + offsets
    return np.repeat(rows, counts), np.asarray(indices[positions], dtype=np.int64)


def _block_stats(r: np.ndarray, c: np.ndarray, nnz: int) -> dict[int, BlockStats]:
    scale = nnz / r.size if r.size else 0.0
    found = {}
    for size in BLOCK_SIZES:
        if r.size == 0:
            found[size] = BlockStats(size, 0.0, 0.0, 0.0)
            continue
        keys = (r // size) * (int(c.max()) // size + 1) + c // size
        _, counts = np.unique(keys, return_counts=True)
        dense = counts >= max(1, size * size // 4)
        found[size] = BlockStats(
            size,
            counts.size * scale,
            float(dense.sum()) * scale,
            float(counts[dense].sum()) * scale,
        )
    return found


def _nm_patterns(
    indices: np.ndarray,
    indptr: np.ndarray,
    lengths: np.ndarray,
    n: int,
    sample: tuple[np.ndarray, np.ndarray],
) -> tuple[tuple[int, int], ...]:
    """The n:m patterns that hold in every row (the sample first, then all rows)."""
    held = []
    for keep, group in NM_PATTERNS:
        stored = len(lengths) * keep * -(-n // group)  # what nm:keep:group stores
        if lengths.sum() < NM_MIN_FILL * stored or lengths.max(initial=0) > stored / len(lengths):
            continue
        if not _nm_holds(*sample, keep, group):
            continue
        if _nm_holds_sorted(indices, indptr, keep, group):
            held.append((keep, group))
    return tuple(held)


def _nm_holds_sorted(indices: np.ndarray, indptr: np.ndarray, keep: int, group: int) -> bool:
    """Whether n:m holds in every row of a CSR matrix, without building row ids where
    its rows are sorted: a group with more than ``keep`` nonzeros then has entries
    ``p`` and ``p + keep`` in one row and one group."""
    indices = np.asarray(indices)
    if indices.size <= keep:
        return True
    # rows_begun[p]: how many rows begin at or before entry p (empty rows count too)
    rows_begun = np.cumsum(np.bincount(indptr[1:-1], minlength=indices.size + 1))
    new_row = rows_begun[1:-1] != rows_begun[:-2]
    if not np.all((indices[1:] > indices[:-1]) | new_row):  # unsorted: the plain way
        lengths = np.diff(indptr)
        rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        return _nm_holds(rows, indices.astype(np.int64), keep, group)
    groups = indices // group
    same_group = groups[keep:] == groups[:-keep]
    same_row = rows_begun[keep:-1] == rows_begun[: -keep - 1]
    return not bool((same_group & same_row).any())


def _nm_holds(rows: np.ndarray, cols: np.ndarray, keep: int, group: int) -> bool:
    """No row has more than ``keep`` of ``(rows, cols)`` in one aligned group of ``group``
    columns."""
    width = int(cols.max(initial=0)) // group + 1
    keys = rows * width + cols // group
    if keys.size == 0:
        return True
    if np.all(keys[1:] >= keys[:-1]):  # sorted indices: runs are contiguous
        bounds = np.flatnonzero(np.diff(keys)) + 1
        runs = np.diff(np.concatenate([[0], bounds, [keys.size]]))
    else:
        _, runs = np.unique(keys, return_counts=True)
    return bool(runs.max() <= keep)
