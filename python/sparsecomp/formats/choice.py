"""Choosing a matrix's layout for an op: candidates, a calibrated cost model, a choice.

``choose(A, op="spmm", k=64)`` reads cheap statistics of ``A``
(:func:`~sparsecomp.formats.stats.matrix_stats`: exact row-length
histogram, sampled block counts, n:m patterns), lists the layouts worth
considering, predicts each one's time and returns the fastest as a
:class:`Choice`. It takes a few tens of milliseconds on 10M nonzeros.

**The model.** Each candidate is described by *features*: how much work of
each kind its kernel does. CSR: its entries and rows; ELL (and each ELL
bucket of ``hyb``): its slots, padding included, and rows; BSR ``RxR``:
its stored values and blocks; n:m: its slots; dense: its cells; a
composable layout the sum over its parts plus one ``parts`` feature per
part (each is a loop nest of its own); and ``gather.miss``, the dense rows
gathered that nearby rows did not already bring into cache (column reuse
from the statistics, times the part of the dense operand that does not fit
:data:`CACHE_BYTES`; a BSR block's rows count once). The predicted time is ``call +
sum(x_f * (a_f + b_f * k))``: per feature a cost per unit that grows
linearly with the dense width ``k`` (SpMM's and SDDMM's columns; 1 for
SpMV). The coefficients come from measuring the machine
(``python -m sparsecomp.tools.calibrate``: the kernel of every candidate on
a few synthetic matrices, fitted by non-negative least squares) and are
cached under ``$SPARSECOMP_CACHE_DIR/calibration/``; until then the
coefficients measured on the development machine (:data:`DEFAULT`) are
used.

**Never worse than CSR.** The model is wrong by some percent; a layout
other than CSR is chosen only if it is predicted :data:`MARGIN` faster.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.stats import BLOCK_SIZES, MatrixStats, matrix_stats

#: A layout other than CSR must be predicted this much faster to be chosen.
MARGIN = 0.10
#: ELL or BSR storing more than this many values per nonzero is not considered.
MAX_PADDING = 4.0
#: hyb widths considered.
HYB_WIDTHS = (8, 32)
#: Densest fraction at which dense is not considered.
DENSE_FROM = 0.10
#: Cache a kernel's gathered dense rows may stay in (a core's L2, about).
CACHE_BYTES = 1 << 20
#: What a calibration stores per op: feature -> [a, b] (seconds per unit: a + b * k).
Coefficients = dict[str, dict[str, list[float]]]


@dataclass(frozen=True)
class Choice:
    """A chosen layout and how it was chosen."""

    #: a layout name ``SparseTensor.from_scipy`` accepts
    layout: str
    #: one sentence: the statistics that decided it
    why: str
    #: decision time (statistics and model), seconds
    seconds: float
    #: predicted seconds per call for every candidate, fastest first
    estimates: dict[str, float] = field(default_factory=dict)
    op: str = "spmm"
    k: int = 1

    def __str__(self) -> str:
        return f"{self.layout}: {self.why}"


def candidates(stats: MatrixStats, op: str) -> list[str]:
    """The layouts worth predicting for ``op`` on a matrix with ``stats``."""
    found = ["csr"]
    m, nnz = stats.rows, stats.nnz
    if nnz == 0:
        return found
    if m * stats.max_row <= MAX_PADDING * nnz:
        found.append("ell")
    for size in BLOCK_SIZES:
        if stats.blocks[size].blocks * size * size <= MAX_PADDING * nnz:
            found.append(f"bsr:{size}x{size}")
    found += [f"nm:{n}:{g}" for n, g in stats.nm]
    if op == "sddmm":  # composable results are not built part by part yet
        return found
    if stats.max_row > 1:
        found += [f"hyb:1:{w}" for w in HYB_WIDTHS if w < 2 * stats.max_row]
    for size in BLOCK_SIZES[1:]:
        if stats.blocks[size].dense_entries >= 0.1 * nnz:
            found.append(f"bsr+csr:{size}x{size}")
    if stats.density >= DENSE_FROM:
        found.append("dense")
    return found


def features(layout: str, stats: MatrixStats, k: int = 1) -> dict[str, float]:
    """The work of ``layout``'s kernel by kind (see the module), with its gathers of
    dense rows that miss the cache (``gather.miss``)."""
    found = _work(layout, stats)
    n = stats.shape[1]
    footprint = n * max(k, 1) * 4  # the gathered dense operand, float32
    spill = max(0.0, 1.0 - CACHE_BYTES / footprint) if footprint else 0.0
    if layout == "dense" or spill == 0.0:
        return found
    if layout.startswith("bsr"):  # a block's dense rows are contiguous: one stream each
        size = int(layout.split(":")[1].split("x")[0])
        fetches = found.get(f"bsr{size}.blocks", 0.0) + found.get("csr.entries", 0.0)
    else:
        fetches = stats.nnz
    found["gather.miss"] = fetches * stats.column_reuse_miss * spill
    return found


def _work(layout: str, stats: MatrixStats) -> dict[str, float]:
    m, n = stats.shape
    nnz = stats.nnz
    if layout == "csr":
        return {"csr.entries": nnz, "csr.rows": m}
    if layout == "ell":
        return {"ell.slots": m * stats.max_row, "ell.rows": m}
    if layout == "dense":
        return {"dense.cells": m * n}
    kind, _, rest = layout.partition(":")
    if kind == "bsr":
        size = int(rest.split("x")[0])
        blocks = stats.blocks[size].blocks
        return {f"bsr{size}.values": blocks * size * size, f"bsr{size}.blocks": blocks}
    if kind == "nm":
        keep, group = (int(v) for v in rest.split(":"))
        return {"nm.slots": m * keep * math.ceil(n / group), "nm.rows": m}
    if kind == "hyb":
        width = int(rest.split(":")[1])
        found = {"ell.slots": 0.0, "ell.rows": 0.0, "parts": 1.0}
        lo, hi = 0, 1
        while hi <= width:
            rows, _ = stats.rows_between(lo, hi)
            found["ell.slots"] += rows * hi
            found["ell.rows"] += rows
            found["parts"] += 1.0 if rows else 0.0
            lo, hi = hi, hi * 2
        _, long_entries = stats.rows_between(width, stats.max_row)
        found["csr.entries"] = long_entries
        found["csr.rows"] = m
        return found
    if kind == "bsr+csr":
        size = int(rest.split("x")[0])
        block = stats.blocks[size]
        return {
            f"bsr{size}.values": block.dense_blocks * size * size,
            f"bsr{size}.blocks": block.dense_blocks,
            "csr.entries": max(0.0, nnz - block.dense_entries),
            "csr.rows": m,
            "parts": 2.0,
        }
    raise SparsecompError(f"no cost model for layout '{layout}'")


def predict(layout: str, stats: MatrixStats, op: str, k: int, coefficients: Coefficients) -> float:
    """Predicted seconds of one ``op`` call over ``layout`` (see the module)."""
    table = coefficients.get(op) or DEFAULT[op]
    width = 1 if op == "spmv" else k
    a, b = table.get("call", [0.0, 0.0])
    total = a + b * width
    for name, amount in features(layout, stats, width).items():
        if name not in table:
            return math.inf  # never measured: not a candidate on this machine
        a, b = table[name]
        total += amount * (a + b * width)
    return total


def calibration_path(target: str = "host") -> Path:
    from sparsecomp import knobs

    return knobs.cache_dir() / "calibration" / f"{target.replace(':', '_')}.json"


def load_coefficients(target: str = "host") -> tuple[Coefficients, str]:
    """The calibration of ``target`` and where it came from (a file, or the defaults)."""
    path = calibration_path(target)
    if path.is_file():
        try:
            return json.loads(path.read_text())["coefficients"], str(path)
        except (OSError, ValueError, KeyError):
            pass
    return DEFAULT, "the development machine's defaults"


def choose(
    A: Any,
    op: str = "spmm",
    k: int = 64,
    target: str = "host",
    *,
    stats: MatrixStats | None = None,
    coefficients: Coefficients | None = None,
) -> Choice:
    """The layout predicted fastest for ``op`` on ``A`` (a scipy.sparse matrix); see the module."""
    start = time.perf_counter()
    if op not in ("spmm", "spmv", "sddmm"):
        raise SparsecompError(f"choose() knows spmm, spmv and sddmm, not '{op}'")
    if target != "host":
        raise SparsecompError(f"choose() has a cost model for the host only, not '{target}'")
    stats = stats if stats is not None else matrix_stats(A)
    coefficients = coefficients if coefficients is not None else load_coefficients(target)[0]
    estimates = {c: predict(c, stats, op, k, coefficients) for c in candidates(stats, op)}
    estimates = dict(sorted(estimates.items(), key=lambda item: item[1]))
    best = next(iter(estimates))
    csr = estimates["csr"]
    if best != "csr" and not estimates[best] < (1 - MARGIN) * csr:
        best = "csr"
    why = _why(best, stats, estimates)
    return Choice(best, why, time.perf_counter() - start, estimates, op, k)


def _why(best: str, stats: MatrixStats, estimates: dict[str, float]) -> str:
    m, n = stats.shape
    mean = stats.nnz / m if m else 0.0
    rows = (
        f"{m}x{n}, {stats.nnz} nonzeros, rows of {mean:.1f} on average and {stats.max_row} at most"
    )
    fills = ", ".join(f"{s}x{s} {100 * stats.fill(s):.0f}%" for s in BLOCK_SIZES)
    csr = estimates["csr"]
    if best == "csr":
        runner = next((c for c in estimates if c != "csr"), None)
        if runner is None:
            return f"{rows}: no other layout applies"
        return (
            f"{rows}, block fill {fills}: no layout predicted {100 * MARGIN:.0f}% faster than "
            f"CSR (next best {runner}, {estimates[runner] / csr:.2f}x CSR's time)"
        )
    return (
        f"{rows}, block fill {fills}: {best} predicted at {estimates[best] * 1e3:.3g} ms, "
        f"{csr / estimates[best]:.2f}x faster than CSR ({csr * 1e3:.3g} ms)"
    )


#: Coefficients measured on the development machine (2 cores; `python -m
#: sparsecomp.tools.calibrate --print`), used until this machine is calibrated.
DEFAULT: Coefficients = {
    "sddmm": {
        "bsr16.blocks": [0, 0],
        "bsr16.values": [3.013e-09, 1.113e-10],
        "bsr2.blocks": [1.379e-08, 0],
        "bsr2.values": [0, 1.256e-10],
        "bsr4.blocks": [0, 2.094e-09],
        "bsr4.values": [2.393e-09, 0],
        "bsr8.blocks": [1.69e-07, 8.032e-09],
        "bsr8.values": [0, 0],
        "call": [0, 0],
        "csr.entries": [2.584e-09, 1.164e-10],
        "csr.rows": [0, 0],
        "ell.rows": [1.01e-08, 2.996e-10],
        "ell.slots": [2.142e-09, 3.291e-11],
        "gather.miss": [0, 4.376e-10],
        "nm.rows": [2.501e-06, 7.312e-08],
        "nm.slots": [0, 0],
    },
    "spmm": {
        "bsr16.blocks": [0, 0],
        "bsr16.values": [0, 3.587e-11],
        "bsr2.blocks": [0, 9.012e-10],
        "bsr2.values": [0, 0],
        "bsr4.blocks": [0, 1.734e-09],
        "bsr4.values": [0, 0],
        "bsr8.blocks": [0, 3.979e-09],
        "bsr8.values": [0, 0],
        "call": [0, 5.156e-06],
        "csr.entries": [0, 2.234e-11],
        "csr.rows": [0, 2.747e-10],
        "dense.cells": [0, 1.138e-09],
        "ell.rows": [0, 7.578e-11],
        "ell.slots": [0, 2.64e-11],
        "gather.miss": [0, 2.093e-10],
        "nm.rows": [0, 2.353e-08],
        "nm.slots": [0, 0],
        "parts": [1.412e-05, 3.034e-07],
    },
    "spmv": {
        "bsr16.blocks": [4.068e-08, 0],
        "bsr16.values": [0, 0],
        "bsr2.blocks": [3.639e-09, 0],
        "bsr2.values": [0, 0],
        "bsr4.blocks": [5.924e-09, 0],
        "bsr4.values": [0, 0],
        "bsr8.blocks": [1.387e-08, 0],
        "bsr8.values": [0, 0],
        "call": [0, 0],
        "csr.entries": [3.929e-10, 0],
        "csr.rows": [9.522e-10, 0],
        "dense.cells": [9.981e-10, 0],
        "ell.rows": [1.459e-09, 0],
        "ell.slots": [5.223e-10, 0],
        "nm.rows": [4.052e-07, 0],
        "nm.slots": [0, 0],
        "parts": [1.985e-08, 0],
    },
}
