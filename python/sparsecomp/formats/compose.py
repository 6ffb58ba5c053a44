"""Splitting nonzeros among the parts of a :class:`~sparsecomp.formats.layout.Composable`.

The rules (documented on :class:`~sparsecomp.formats.layout.Part`) take the
nonzeros that earlier parts left, in order:

* ``ell_bucket [p, P, lo, hi]``: columns are cut into ``P`` partitions of
  width ``ceil(ncols / P)``; a row whose remaining nonzeros in partition
  ``p`` number ``c`` with ``lo < c <= hi`` gives all of them to the part;
* ``block_dense [R, C, k]``: every aligned R x C block holding at least
  ``k`` remaining nonzeros gives all of them to the part;
* ``rest``: everything left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.ordering import check_no_duplicates, sort_entries


def assign_parts(layout: Composable, shape: Any, coords: Any) -> np.ndarray:
    """The part index (int64) of every nonzero; ``coords`` is ``(ndim, nnz)`` and in range."""
    dims = tuple(int(d) for d in shape)
    crds = np.asarray(coords, dtype=np.int64).reshape(len(dims), -1)
    part = np.full(crds.shape[1], len(layout.parts) - 1, dtype=np.int64)
    free = np.ones(crds.shape[1], dtype=bool)
    pending: _Buckets | None = None
    for i, p in enumerate(layout.parts[:-1]):
        if len(dims) != 2:
            raise FormatError(f"rule '{p.rule}' needs a matrix, got shape {dims}")
        if p.rule == "ell_bucket" and pending is not None and pending.nparts == p.params[1]:
            pending.take(i, p.params)
            continue
        if pending is not None:
            pending.settle(part, free)
            pending = None
        if p.rule == "ell_bucket":
            pending = _Buckets.start(p.params[1], dims, crds, free)
            pending.take(i, p.params)
        else:
            taken = _block_dense(p.params, dims, crds, free)
            part[taken] = i
            free &= ~taken
    if pending is not None:
        pending.settle(part, free)
    return part


@dataclass
class _Buckets:
    """ELL-bucket decisions for ``P`` column partitions, made per (row, partition) segment.

    A bucket takes whole segments, so a run of buckets with the same ``P``
    only updates per-segment counts; entries learn their part in
    :meth:`settle`.
    """

    nparts: int
    nrows: int
    seg: np.ndarray  # per entry: row * P + partition
    counts: np.ndarray  # per segment: entries no part has taken yet
    owner: np.ndarray  # per segment: the part that took it, or -1

    @classmethod
    def start(
        cls, nparts: int, shape: tuple[int, ...], crds: np.ndarray, free: np.ndarray
    ) -> _Buckets:
        nrows, ncols = shape
        width = max(-(-ncols // nparts), 1)
        seg = crds[0] * nparts + crds[1] // width
        counts = np.bincount(seg[free], minlength=nrows * nparts)
        return cls(nparts, nrows, seg, counts, np.full(nrows * nparts, -1, np.int64))

    def take(self, index: int, params: tuple[int, ...]) -> None:
        """Part ``index`` takes the segments of partition ``p`` with ``lo < count <= hi``."""
        p, _, lo, hi = params
        segs = np.arange(self.nrows) * self.nparts + p
        counts = self.counts[segs]
        chosen = segs[(counts > lo) & (counts <= hi)]
        self.owner[chosen] = index
        self.counts[chosen] = 0

    def settle(self, part: np.ndarray, free: np.ndarray) -> None:
        """Record the decisions on the entries (``part``) and mark them taken (``free``)."""
        owner = self.owner[self.seg]
        mine = (owner >= 0) & free
        part[mine] = owner[mine]
        free &= ~mine


def split_parts(
    layout: Composable, shape: tuple[int, ...], coords: np.ndarray, values: np.ndarray
) -> list[tuple[Layout, np.ndarray, np.ndarray]]:
    """Per part its layout and its entries, in input order; duplicates are a FormatError."""
    order, key = sort_entries(coords, shape)
    check_no_duplicates(coords, coords if order is None else coords[:, order], order, key)
    which = assign_parts(layout, shape, coords)
    nparts = len(layout.parts)
    small = which.astype(np.int16) if nparts < 2**15 else which
    by_part = np.argsort(small, kind="stable")
    ends = np.cumsum(np.bincount(which, minlength=nparts))
    crds, vals = coords[:, by_part], values[by_part]
    return [
        (part.layout, crds[:, end - n : end], vals[end - n : end])
        for part, end, n in zip(layout.parts, ends, np.diff(ends, prepend=0), strict=True)
    ]


def _block_dense(
    params: tuple[int, ...], shape: tuple[int, ...], crds: np.ndarray, free: np.ndarray
) -> np.ndarray:
    r, c, k = params
    sel = np.flatnonzero(free)
    blocks = np.stack([crds[0, sel] // r, crds[1, sel] // c])
    extents = (-(-shape[0] // r), -(-shape[1] // c))
    taken = np.zeros_like(free)
    taken[sel[group_sizes(blocks, extents) >= k]] = True
    return taken


def group_sizes(crds: np.ndarray, extents: tuple[int, ...]) -> np.ndarray:
    """For each tuple (column of ``crds``), how many tuples equal it."""
    n = crds.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order, _ = sort_entries(crds, extents)
    ordered = crds if order is None else crds[:, order]
    new = np.ones(n, dtype=bool)
    new[1:] = np.any(ordered[:, 1:] != ordered[:, :-1], axis=0)
    gid = np.cumsum(new) - 1
    sizes = np.bincount(gid)[gid]
    if order is None:
        return sizes
    out = np.empty(n, dtype=np.int64)
    out[order] = sizes
    return out
