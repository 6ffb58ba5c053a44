"""torch CPU sparse CSR (``torch.sparse_csr_tensor`` with int32 indices).

SpMV ``A @ x``, SpMM ``A @ B``; SDDMM ``torch.sparse.sampled_addmm(S, X, Y.T,
beta=0)`` (the sampled product X Y^T at S's entries) whose values are then
multiplied by S's values: torch has no fused ``S .* (X Y^T)``. Tensors share
memory with the numpy operands (``torch.from_numpy``); threads: torch's
default (``torch.get_num_threads()``).
"""

from __future__ import annotations

import warnings

import numpy as np

from peers import Case, Peer, Run, Unavailable


class TorchPeer(Peer):
    name = "torch"

    def __init__(self) -> None:
        super().__init__()
        try:
            import torch
        except ImportError:
            self.torch = None
            self.about = "torch not installed (pip install -e '.[bench]')"
            return
        self.torch = torch
        self.about = (
            f"torch {torch.__version__} sparse CSR, {torch.get_num_threads()} threads; "
            "SDDMM: sampled_addmm(beta=0) then values * S.values; SpGEMM: CSR @ CSR"
        )

    def prepare(self, case: Case) -> Run:
        torch = self.torch
        if torch is None:
            raise Unavailable("torch not installed")
        a = case.a
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
            t = torch.sparse_csr_tensor(
                torch.from_numpy(a.indptr),
                torch.from_numpy(a.indices),
                torch.from_numpy(a.data),
                size=a.shape,
                check_invariants=False,
            )
        dense = [torch.from_numpy(np.ascontiguousarray(d)) for d in case.dense]
        if case.op == "spgemm":
            return lambda: t @ t
        if case.op in ("spmv", "spmm"):
            operand = dense[0]
            return lambda: (t @ operand).numpy()
        x, yt = dense[0], dense[1].T
        values = t.values()

        def sddmm() -> np.ndarray:
            return (torch.sparse.sampled_addmm(t, x, yt, beta=0.0).values() * values).numpy()

        return sddmm
