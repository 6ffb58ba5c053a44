"""The test matrices of ``cpu.py``: float32 CSR, int32 indices, fixed seeds.

Each generator returns a canonical ``scipy.sparse.csr_matrix`` (sorted,
unique column indices; duplicates summed). Sizes (full / ``--quick``):

* ``rmat``: R-MAT power-law graph, ``2**scale`` rows and columns (scale 16 to
  18, ``--scale``; quick: 10), ``16 * 2**scale`` edges drawn with the Graph500
  parameters a, b, c = 0.57, 0.19, 0.19, vertex ids randomly permuted,
  duplicates summed (so the average degree ends a little under 16);
* ``fem``: banded FEM-like matrix, the 27-point stencil of a 48^3 grid in
  natural order (110,592 rows, bandwidth 2,353; quick: 8^3);
* ``uniform1%``: 8192 x 8192 at 1% density (quick: 512 x 512);
* ``uniform0.1%``: 32768 x 32768 at 0.1% (quick: 2048 x 2048);
* ``pruned90``: a 4096 x 4096 standard-normal weight matrix, the 90% of
  smallest magnitudes removed (quick: 256 x 256);
* ``2:4``: the same weights, 2 of every 4 consecutive row elements kept;
* ``block16``: the same weights, 90% of its 16 x 16 blocks (smallest L1 norm)
  removed;
* ``band``: ``2**18`` rows, the 17 diagonals -8..8 (quick: ``2**12`` rows):
  short rows whose gathers stay in cache;
* real matrices (``data/real``, their sources in ``data/real/SOURCES.md``):
  graphs (email-Enron, ca-HepPh, p2p-Gnutella31, wiki-Vote, the 4elt mesh),
  FEM (bcsstk16, bcsstk13), circuits (memplus, rajat01) and a chemical
  process (bayer10), 43k to 368k nonzeros (quick: rajat01 only). Graphs,
  stored as patterns, get standard-normal values.

The pruned matrices come from :func:`sparsecomp.sparsify` (STen conventions).
Values of the structural matrices are standard normal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from sparsecomp import sparsify

RMAT_ABC = (0.57, 0.19, 0.19)
REAL = Path(__file__).resolve().parent / "data" / "real"
#: name -> kind, for the real matrices in ``REAL`` (table order)
REAL_MATRICES = {
    "email-Enron": "SNAP e-mail graph",
    "ca-HepPh": "SNAP co-authorship graph",
    "p2p-Gnutella31": "SNAP peer-to-peer graph",
    "wiki-Vote": "SNAP vote graph",
    "4elt": "2-D FE mesh graph",
    "bcsstk16": "FEM stiffness (HB)",
    "bcsstk13": "FEM stiffness (HB)",
    "memplus": "circuit (Hamm)",
    "rajat01": "circuit (Rajat)",
    "bayer10": "chemical process (Grund)",
}


@dataclass(frozen=True)
class Spec:
    """A matrix to build: its name, a one-line description and its builder."""

    name: str
    about: str
    build: Callable[[], sp.csr_matrix]


def canonical(m: sp.spmatrix) -> sp.csr_matrix:
    """float32 CSR with sorted unique int32 indices (what every peer receives)."""
    m = sp.csr_matrix(m, dtype=np.float32)
    m.sum_duplicates()
    m.indices = m.indices.astype(np.int32, copy=False)
    m.indptr = m.indptr.astype(np.int32, copy=False)
    return m


def rmat(scale: int, degree: int = 16, seed: int = 1) -> sp.csr_matrix:
    """R-MAT graph with ``2**scale`` vertices and ``degree * 2**scale`` edges."""
    rng = np.random.default_rng(seed)
    n, edges = 1 << scale, degree << scale
    a, b, c = RMAT_ABC
    rows = np.zeros(edges, np.int64)
    cols = np.zeros(edges, np.int64)
    for bit in range(scale):
        r = rng.random(edges)
        down = r >= a + b  # quadrants c and d
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)  # quadrants b and d
        rows |= down.astype(np.int64) << bit
        cols |= right.astype(np.int64) << bit
    perm = rng.permutation(n)
    values = rng.standard_normal(edges, dtype=np.float32)
    return canonical(sp.coo_matrix((values, (perm[rows], perm[cols])), shape=(n, n)))


def fem(grid: int, seed: int = 2) -> sp.csr_matrix:
    """27-point stencil on a ``grid**3`` mesh, natural order (a banded matrix)."""
    t = sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(grid, grid), format="csr")
    m = canonical(sp.kron(sp.kron(t, t), t, format="csr"))
    m.data = np.random.default_rng(seed).standard_normal(m.nnz, dtype=np.float32)
    return m


def band(n: int, half: int = 8, seed: int = 5) -> sp.csr_matrix:
    """``n x n`` with the ``2 * half + 1`` diagonals around the main one, standard-normal values."""
    rng = np.random.default_rng(seed)
    offsets = list(range(-half, half + 1))
    diagonals = [rng.standard_normal(n - abs(k), dtype=np.float32) for k in offsets]
    return canonical(sp.diags(diagonals, offsets, shape=(n, n), format="csr"))


def real(name: str, seed: int = 6) -> sp.csr_matrix:
    """A real matrix of ``REAL``; a pattern (all values equal) gets standard-normal values."""
    m = canonical(sp.load_npz(REAL / f"{name}.npz"))
    if m.nnz and np.all(m.data == m.data[0]):
        m.data = np.random.default_rng(seed).standard_normal(m.nnz, dtype=np.float32)
    return m


def uniform(n: int, density: float, seed: int = 3) -> sp.csr_matrix:
    """``n x n`` with about ``density * n * n`` nonzeros at uniform positions."""
    rng = np.random.default_rng(seed)
    flat = np.unique(rng.integers(0, n * n, round(density * n * n), dtype=np.int64))
    values = rng.standard_normal(flat.size, dtype=np.float32)
    return canonical(sp.csr_matrix((values, (flat // n, flat % n)), shape=(n, n)))


def weights(n: int, seed: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, n), dtype=np.float32)


def pruned(n: int, sparsifier: str) -> sp.csr_matrix:
    """The weights of :func:`weights` sparsified (``sparsecomp.sparsify``)."""
    return canonical(sp.csr_matrix(sparsify(weights(n), sparsifier)))


def suite(scale: int = 16, quick: bool = False) -> list[Spec]:
    """The matrices of one run, in table order."""
    s = 10 if quick else scale
    grid, n1, n01, w = (8, 512, 2048, 256) if quick else (48, 8192, 32768, 4096)
    b = 12 if quick else 18
    return [
        Spec("rmat", f"R-MAT 2^{s}, degree 16", lambda: rmat(s)),
        Spec("fem", f"27-point stencil {grid}^3", lambda: fem(grid)),
        Spec("uniform1%", f"{n1}^2 uniform 1%", lambda: uniform(n1, 0.01)),
        Spec("uniform0.1%", f"{n01}^2 uniform 0.1%", lambda: uniform(n01, 0.001)),
        Spec("pruned90", f"{w}^2 90% magnitude-pruned", lambda: pruned(w, "scalar_fraction:0.9")),
        Spec("2:4", f"{w}^2 2:4 pruned", lambda: pruned(w, "nm:2:4")),
        Spec(
            "block16",
            f"{w}^2 16x16 blocks, 90% zero",
            lambda: pruned(w, "block_fraction:16x16:0.9"),
        ),
        Spec("band", f"2^{b} rows, 17 diagonals", lambda: band(1 << b)),
        *(
            Spec(name, f"real: {kind}", lambda name=name: real(name))
            for name, kind in REAL_MATRICES.items()
            if not quick or name == "rajat01"
        ),
    ]
