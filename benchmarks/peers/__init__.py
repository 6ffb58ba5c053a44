"""The implementations ``cpu.py`` compares, behind one small interface.

A peer's ``prepare(case)`` does everything that is not part of the timed
operation (packing the matrix into its own format, compiling a kernel for
the shape) and returns a closure computing the result as a numpy array:
``y`` for SpMV, ``C`` for SpMM, the values aligned with ``S.data`` for SDDMM;
for SpGEMM its own sparse result (a scipy matrix, a ``SparseTensor``, a torch
CSR tensor), which ``cpu.py`` reads back as scipy CSR outside the timing.
It raises :class:`Unavailable` (shown as ``n/a``) with a one-line reason when
it cannot run that case, and :class:`Aborted` when its compiler killed the
process it ran in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

OPS = ("spmv", "spmm", "sddmm", "spgemm")
Run = Callable[[], np.ndarray]


class Unavailable(Exception):
    """This peer cannot run this case; the message says why."""


class Aborted(Exception):
    """This peer's compiler aborted (in a subprocess); the message says how."""


@dataclass
class Case:
    """One operation on one matrix, with its dense operands."""

    op: str
    matrix: str
    a: sp.csr_matrix  # float32, int32 indices, canonical
    dense: tuple[np.ndarray, ...]  # spmv: (x,); spmm: (B,); sddmm: (X, Y); spgemm: ()
    #: why the case is not run (every peer shows n/a), or None
    skip: str | None = None

    @property
    def k(self) -> int | None:
        return None if self.op in ("spmv", "spgemm") else self.dense[0].shape[1]

    @property
    def label(self) -> str:
        return self.op if self.k is None else f"{self.op} K={self.k}"


class Peer:
    """Base of the peers: a name, how it runs, and its compile times."""

    name = ""

    def __init__(self) -> None:
        #: How it runs (threads, flags), printed under the tables.
        self.about = ""
        #: Compile seconds keyed by "<op> <what>": (cold, from the cache or None).
        self.compile_times: dict[str, tuple[float, float | None]] = {}

    def prepare(self, case: Case) -> Run:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the peer holds (worker processes)."""
