"""scipy.sparse CSR (single-threaded), and the SDDMM reference in numpy.

For SpGEMM scipy's ``A @ A`` leaves each row's columns in the order its
workspace found them (``has_sorted_indices`` is False) and drops exact
zeros; the other peers give sorted rows.

scipy has no SDDMM: ``sddmm`` gathers the rows of X and Y named by each
stored entry and takes row-wise dot products (``einsum``), in chunks of
2^18 entries to bound the temporary memory, then scales by ``S.data``.
"""

from __future__ import annotations

import numpy as np
import scipy
import scipy.sparse as sp

from peers import Case, Peer, Run

CHUNK = 1 << 18


def sddmm(s: sp.csr_matrix, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """S .* (X Y^T) at S's stored entries, as values aligned with ``s.data``."""
    rows = np.repeat(np.arange(s.shape[0], dtype=np.int32), np.diff(s.indptr))
    out = np.empty(s.nnz, dtype=np.result_type(s.dtype, x.dtype))
    for lo in range(0, s.nnz, CHUNK):
        hi = min(lo + CHUNK, s.nnz)
        np.einsum("ij,ij->i", x[rows[lo:hi]], y[s.indices[lo:hi]], out=out[lo:hi])
    out *= s.data
    return out


def compute(case: Case, a: sp.csr_matrix | None = None) -> np.ndarray:
    """The result of ``case`` with scipy (optionally on another matrix ``a``)."""
    a = case.a if a is None else a
    if case.op == "sddmm":
        return sddmm(a, *case.dense)
    if case.op == "spgemm":
        return a @ a  # type: ignore[no-any-return]
    return np.asarray(a @ case.dense[0])


class ScipyPeer(Peer):
    name = "scipy"

    def __init__(self) -> None:
        super().__init__()
        self.about = (
            f"scipy {scipy.__version__} csr_matrix @ (1 thread); "
            "SDDMM: numpy gather + einsum in chunks, times S.data; SpGEMM: A @ A "
            "(rows not sorted, exact zeros dropped)"
        )

    def prepare(self, case: Case) -> Run:
        return lambda: compute(case)
