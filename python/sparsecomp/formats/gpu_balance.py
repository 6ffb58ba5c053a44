"""Which GPU schedule a CSR kernel takes on a matrix: by its rows, or its entries split evenly.

The CUDA schedule gives each row of SpMV 8 lanes and each row of SpMM and
SDDMM a warp (``balance="rows"``), or gives every thread (SpMV) or warp
(SpMM, SDDMM) an equal share of the entries (``balance="nonzeros"``:
:mod:`sparsecomp.transforms._nonzero_split`, with atomic adds where a row
spans shares; :mod:`sparsecomp.transforms._entry_split` for SDDMM, whose
entries are written once each). By rows, the warp with the longest row
finishes last; split, every call pays binary searches per share, and SpMV
and SpMM a zero fill and the atomics.

The rule: split where the row lengths' coefficient of variation (standard
deviation over mean) is at least :data:`SPLIT_FROM_CV`. It comes from the
estimate calibrated on the H100 (:mod:`sparsecomp.runtime.gpu_model`) over
the 19 matrices of the GPU benchmark, both schedules profiled: every matrix
with a spread of 2 or more (R-MAT 2^16 and 2^20, email-Enron, ca-HepPh,
wiki-Vote, memplus, rajat01: 2.4-9.2) was estimated faster split (SpMV
1.1-6.2x, SpMM 1.3-6.8x, SDDMM 1.7-7.9x), every other (0-1.9,
p2p-Gnutella31 the highest) faster by rows or within 1.0-1.14x of the split
(split 0.2-1.14x; the one above 1.02, block16's SpMM at K=32). These are
estimates, not GPU
times (the profile counts no cache, which may make the split look worse on
even rows than it is); ``benchmarks/cuda.py`` on a GPU times both
schedules (``spmv-split``, ``spmm-split``, ``sddmm-split``) to check it.
"""

from __future__ import annotations

import numpy as np

from sparsecomp.formats.stats import MatrixStats

#: Split by entries from this coefficient of variation of the row lengths.
SPLIT_FROM_CV = 2.0
#: The ops whose CSR kernel has the split (a row sum stored to its row, a dot product
#: per entry).
OPS = ("spmv", "spmm", "sddmm")


def row_length_spread(stats: MatrixStats) -> float:
    """The row lengths' coefficient of variation (0 for an empty matrix)."""
    hist = np.asarray(stats.row_lengths_hist, dtype=np.float64)
    rows = hist.sum()
    if rows == 0 or stats.nnz == 0:
        return 0.0
    lengths = np.arange(len(hist), dtype=np.float64)
    mean = float((hist * lengths).sum() / rows)
    variance = float((hist * (lengths - mean) ** 2).sum() / rows)
    return variance**0.5 / mean


def choose_balance(stats: MatrixStats, op: str) -> tuple[str, str]:
    """``(balance, why)`` for ``op``'s CSR kernel on a GPU: ``"nonzeros"`` or ``"rows"``."""
    spread = row_length_spread(stats)
    if op not in OPS:
        return "rows", f"{op} has no schedule split by entries"
    if spread >= SPLIT_FROM_CV:
        sharers = "threads" if op == "spmv" else "warps"
        return "nonzeros", (
            f"rows of uneven lengths (spread {spread:.1f} >= {SPLIT_FROM_CV}, longest "
            f"{stats.max_row}): entries split evenly between {sharers}"
        )
    return "rows", f"rows of even enough lengths (spread {spread:.1f} < {SPLIT_FROM_CV})"
