"""torch CPU sparse CSR (``torch.sparse_csr_tensor`` with int32 indices).

SpMV ``A @ x``, SpMM ``A @ B``; SDDMM ``torch.sparse.sampled_addmm(S, X, Y.T,
beta=0)`` (the sampled product X Y^T at S's entries) whose values are then
multiplied by S's values: torch has no fused ``S .* (X Y^T)``. Tensors share
memory with the numpy operands (``torch.from_numpy``); threads: torch's
default (``torch.get_num_threads()``).

SpGEMM ``A @ A`` (CSR @ CSR) leaks its result on every call in torch 2.13
(286 MiB a call on the 8192^2 uniform 1% matrix; a 5-round run of
``cpu.py`` filled this machine's 24 GiB). Where the result holds more than
``LEAKY_BYTES``, each case's calls therefore run in a worker process of
their own (``multiprocessing`` spawn; the leak ends with it): a call is a
message to it and its reply, tens of microseconds against the
milliseconds such a product takes. Smaller results are computed here.
"""

from __future__ import annotations

import multiprocessing
import warnings
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import scipy.sparse as sp

from peers import Case, Peer, Run, Unavailable

#: SpGEMM results above this many bytes are computed in a worker (see above).
LEAKY_BYTES = 8 << 20


def _csr(torch: Any, a: sp.csr_matrix) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(
            torch.from_numpy(a.indptr),
            torch.from_numpy(a.indices),
            torch.from_numpy(a.data),
            size=a.shape,
            check_invariants=False,
        )


def _serve(conn: Connection, a: sp.csr_matrix) -> None:
    """The worker: ``"run"`` computes ``A @ A``; ``"result"`` also sends it back."""
    import torch

    t = _csr(torch, a)
    while (ask := conn.recv()) is not None:
        c = t @ t
        if ask == "result":
            arrays = (c.values().numpy(), c.col_indices().numpy(), c.crow_indices().numpy())
            conn.send(sp.csr_matrix(arrays, shape=a.shape))
        else:
            conn.send(True)


class _Worker:
    """One case's SpGEMM in a process of its own."""

    def __init__(self, a: sp.csr_matrix) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, a), daemon=True)
        self.process.start()
        self.fetched = False

    def run(self) -> Any:
        """The product (the first call, which ``cpu.py`` checks), then only the time."""
        self.conn.send("run" if self.fetched else "result")
        reply = self.conn.recv()
        self.fetched = True
        return reply

    def close(self) -> None:
        self.conn.send(None)
        self.process.join(timeout=30)


class TorchPeer(Peer):
    name = "torch"

    def __init__(self) -> None:
        super().__init__()
        self.worker: _Worker | None = None
        try:
            import torch
        except ImportError:
            self.torch = None
            self.about = "torch not installed (pip install -e '.[bench]')"
            return
        self.torch = torch
        self.about = (
            f"torch {torch.__version__} sparse CSR, {torch.get_num_threads()} threads; "
            "SDDMM: sampled_addmm(beta=0) then values * S.values; SpGEMM: CSR @ CSR "
            f"(in a worker process where the result exceeds {LEAKY_BYTES >> 20} MiB: "
            "torch leaks it on every call)"
        )

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def prepare(self, case: Case) -> Run:
        torch = self.torch
        if torch is None:
            raise Unavailable("torch not installed")
        self.close()  # the previous case's worker
        t = _csr(torch, case.a)
        dense = [torch.from_numpy(np.ascontiguousarray(d)) for d in case.dense]
        if case.op == "spgemm":
            if (case.a @ case.a).nnz * 12 <= LEAKY_BYTES:  # values and column indices
                return lambda: t @ t
            self.worker = _Worker(case.a)
            return self.worker.run
        if case.op in ("spmv", "spmm"):
            operand = dense[0]
            return lambda: (t @ operand).numpy()
        x, yt = dense[0], dense[1].T
        values = t.values()

        def sddmm() -> np.ndarray:
            return (torch.sparse.sampled_addmm(t, x, yt, beta=0.0).values() * values).numpy()

        return sddmm
