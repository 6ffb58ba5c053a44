"""Dense numpy (BLAS) on the densified matrix, for matrices of at most 4096^2 entries.

SpMV ``D @ x`` (sgemv), SpMM ``D @ B`` (sgemm), SDDMM ``(X @ Y.T)`` (sgemm,
the whole M x N product) gathered at S's entries and scaled by ``S.data``.
The densified copy is made outside the timed call.
"""

from __future__ import annotations

import numpy as np

from peers import Case, Peer, Run, Unavailable

MAX_ENTRIES = 4096 * 4096


def _blas() -> str:
    try:
        config = np.show_config(mode="dicts")
        return str(config["Build Dependencies"]["blas"]["name"])
    except Exception:  # the config layout differs between numpy versions
        return "BLAS"


class DensePeer(Peer):
    name = "dense"

    def __init__(self) -> None:
        super().__init__()
        self.about = (
            f"numpy {np.__version__} with {_blas()} on the densified matrix "
            f"(only matrices with <= {MAX_ENTRIES:,} entries)"
        )

    def prepare(self, case: Case) -> Run:
        m, n = case.a.shape
        if m * n > MAX_ENTRIES:
            raise Unavailable(f"{m}x{n} is larger than 4096^2 entries")
        if case.op == "spgemm":
            raise Unavailable("SpGEMM has no dense counterpart here")
        if case.op != "sddmm":
            d, operand = case.a.toarray(), case.dense[0]
            return lambda: d @ operand
        x, y = case.dense
        rows = np.repeat(np.arange(m, dtype=np.int32), np.diff(case.a.indptr))
        cols, vals = case.a.indices, case.a.data
        return lambda: (x @ y.T)[rows, cols] * vals
