"""Choosing a matrix's layout for an op: candidates, a calibrated cost model, a choice.

``choose(A, op="spmm", k=64)`` reads cheap statistics of ``A``
(:func:`~sparsecomp.formats.stats.matrix_stats`: exact row-length
histogram, sampled block counts, column reuse), lists the layouts worth
considering (CSR, ELL, BSR 2, 3, 4, 6, 8 and 16, ``hyb``, ``bsr+csr``, dense; not n:m,
whose CPU kernel ran slower than CSR on every calibration matrix: it is
the GPU's sparse tensor cores' layout), predicts each one's time and returns the fastest as a
:class:`Choice`. It takes a few tens of milliseconds on 10M nonzeros.

**The model.** Each candidate is described by *features*: how much work of
each kind its kernel does. CSR: its entries and rows; ELL (and each ELL
bucket of ``hyb``): its slots, padding included, and rows, both by the
row-length class of :data:`LENGTH_CLASSES` (a loop of 27 fixed trips runs
faster per entry than one of 3); BSR ``RxR``:
its stored values and blocks; n:m: its slots; dense: its cells; a
composable layout the sum over its parts plus one ``parts`` feature per
part (each is a loop nest of its own); and ``gather.miss``, the dense rows
gathered that nearby rows did not already bring into cache (column reuse
from the statistics, times the part of the dense operand that does not fit
:data:`CACHE_BYTES`; a BSR block's rows count once, and ``bsr+csr``'s CSR rest
its entries'); and ``stream.bytes``,
the bytes the layout stores times the part of them that does not fit the
last-level cache (a matrix that stays in cache is read at cache speed, one
that does not at memory speed: what makes a layout that stores zeros lose
on big matrices). The predicted time is ``call +
sum(x_f * (a_f + b_f * k))``: per feature a cost per unit that grows
linearly with the dense width ``k`` (SpMM's and SDDMM's columns; 1 for
SpMV). The coefficients come from measuring the machine
(``python -m sparsecomp.tools.calibrate``: the kernel of every candidate on
a few synthetic matrices, fitted by non-negative least squares) and are
cached under ``$SPARSECOMP_CACHE_DIR/calibration/``; until then the
coefficients measured on the development machine (:data:`DEFAULT`) are
used.

**The GPU** (``target="cuda:sm_80"`` / ``"cuda:sm_90"``): the same features
without the host's cache terms, and coefficients fitted to what the
emulator's profiler predicts for an H100 (``calibrate --target cuda:sm_80``
runs every candidate's kernel under ``cuda-emu`` with ``profile=True`` on
small matrices and takes ``Profile.h100_seconds``, the roofline of the
sectors it counts): no GPU is needed, and the choice follows the schedule
the CUDA back end really emits (ELL buckets a lane per slot, BSR blocks on
a warp, n:m where it holds). Dense is not a GPU candidate. Where CSR is
chosen for SpMV, SpMM or SDDMM, ``Choice.balance`` also says which schedule its
kernel takes, by rows or with the entries split evenly
(:mod:`sparsecomp.formats.gpu_balance`: split where the row lengths vary
widely), and ``exe.prepare`` builds that variant.

**Never worse than CSR.** The model is wrong by 10-20% on a typical case
and more on some (``calibrate`` prints its median and worst error); a
layout other than CSR is chosen only if it is predicted :data:`MARGIN`
(25%) faster.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.gpu_balance import OPS as BALANCED_OPS
from sparsecomp.formats.gpu_balance import choose_balance
from sparsecomp.formats.stats import BLOCK_SIZES, MatrixStats, matrix_stats

#: A layout other than CSR must be predicted this much faster to be chosen.
MARGIN = 0.25
#: ELL or BSR storing more than this many values per nonzero is not considered.
MAX_PADDING = 4.0
#: hyb widths considered.
HYB_WIDTHS = (8, 32)
#: Densest fraction at which dense is not considered.
DENSE_FROM = 0.10
#: Cache a kernel's gathered dense rows may stay in (a core's L2, about).
CACHE_BYTES = 1 << 20
#: The version of the features; calibrations of another version are not used
#: (``calibrate --refit`` refits one from its measurements).
MODEL = 6
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
    #: seconds per call measured on a sample of the matrix, for the layouts timed
    #: (``exe.prepare`` on a CPU: :mod:`sparsecomp.runtime.tournament`); empty: none
    measured: dict[str, float] = field(default_factory=dict)
    #: the GPU schedule of a CSR SpMV, SpMM or SDDMM (``gpu_balance``: ``"rows"`` or
    #: ``"nonzeros"``, :mod:`sparsecomp.formats.gpu_balance`); None elsewhere
    balance: str | None = None

    def __str__(self) -> str:
        return f"{self.layout}: {self.why}"


def device_of(target: str) -> str:
    """``"host"`` or ``"cuda"`` (``cuda:sm_80``, ``cuda-emu:sm_90`` ...): whose model to use."""
    if target == "host":
        return "host"
    if target.startswith(("cuda:sm_", "cuda-emu:sm_")):
        return "cuda"
    raise SparsecompError(
        f"choose() has cost models for 'host' and 'cuda:sm_XX' targets, not '{target}'"
    )


def candidates(stats: MatrixStats, op: str, device: str = "host") -> list[str]:
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
    if device == "cuda":  # the GPU's sparse tensor cores' layout
        found += [f"nm:{n}:{g}" for n, g in stats.nm]
    if op == "sddmm":  # composable results are not built part by part yet
        return found
    if stats.max_row > 1:
        found += [f"hyb:1:{w}" for w in HYB_WIDTHS if w < 2 * stats.max_row]
    for size in BLOCK_SIZES[1:]:
        if stats.blocks[size].dense_entries >= 0.1 * nnz:
            found.append(f"bsr+csr:{size}x{size}")
    if stats.density >= DENSE_FROM and device == "host":
        found.append("dense")
    return found


def features(layout: str, stats: MatrixStats, k: int = 1, device: str = "host") -> dict[str, float]:
    """The work of ``layout``'s kernel by kind (see the module), with, on the host, its
    gathers of dense rows that miss the cache (``gather.miss``) and its bytes streamed
    past the last-level cache (``stream.bytes``)."""
    found = _work(layout, stats)
    if device != "host":  # the GPU's model counts every sector, as the emulator does
        return found
    stored = _bytes(found)
    spilled = max(0.0, 1.0 - last_level_cache() / stored) if stored else 0.0
    if spilled:
        found["stream.bytes"] = stored * spilled
    n = stats.shape[1]
    footprint = n * max(k, 1) * 4  # the gathered dense operand, float32
    spill = max(0.0, 1.0 - CACHE_BYTES / footprint) if footprint else 0.0
    if layout == "dense" or spill == 0.0:
        return found
    if layout.startswith("bsr"):  # a block's dense rows are contiguous: one stream each
        size = int(layout.split(":")[1].split("x")[0])
        rest = sum(v for name, v in found.items() if name.startswith("csr.entries"))
        fetches = found.get(f"bsr{size}.blocks", 0.0) + rest  # bsr+csr: its CSR rest too
    else:
        fetches = stats.nnz
    found["gather.miss"] = fetches * stats.column_reuse_miss * spill
    return found


def _bytes(work: dict[str, float]) -> float:
    """Bytes a layout stores, from its work: 4-byte values, coordinates and positions."""
    total = 0.0
    for name, amount in work.items():
        if name.startswith(("csr.entries", "ell.slots")):
            total += 8 * amount  # value and coordinate
        elif name.endswith((".values", ".cells", ".blocks", ".rows")):
            total += 4 * amount
    return total


@functools.cache
def last_level_cache() -> int:
    """The last-level cache in bytes (Linux sysfs; 32 MiB where it cannot be read)."""
    found = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            found = max(found, int(digits) * scale)
    return found or 32 << 20


#: Row-length classes (at most this many entries) of CSR entries and ELL slots:
#: a loop over a row costs per entry what its trip count allows (unrolling, vectors).
LENGTH_CLASSES = ((4, "short"), (32, "mid"))


def _length_class(length: int) -> str:
    return next((name for top, name in LENGTH_CLASSES if length <= top), "long")


def _csr(stats: MatrixStats, lo: int, hi: int, found: dict[str, float]) -> None:
    """CSR over the rows with more than ``lo`` and at most ``hi`` entries, by class."""
    bounds = [lo] + [top for top, _ in LENGTH_CLASSES if lo < top < hi] + [hi]
    for start, stop in itertools.pairwise(bounds):
        _, entries = stats.rows_between(start, stop)
        name = f"csr.entries.{_length_class(stop)}"
        found[name] = found.get(name, 0.0) + entries
    found["csr.rows"] = found.get("csr.rows", 0.0) + stats.rows


def _ell(width: int, rows: float, found: dict[str, float]) -> None:
    name = f"ell.slots.{_length_class(width)}"
    found[name] = found.get(name, 0.0) + rows * width
    found["ell.rows"] = found.get("ell.rows", 0.0) + rows


def _work(layout: str, stats: MatrixStats) -> dict[str, float]:
    m, n = stats.shape
    nnz = stats.nnz
    found: dict[str, float] = {}
    if layout == "csr":
        _csr(stats, 0, stats.max_row, found)
        return found
    if layout == "ell":
        _ell(stats.max_row, m, found)
        return found
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
        found["parts"] = 1.0
        lo, hi = 0, 1
        while hi <= width:
            rows, _ = stats.rows_between(lo, hi)
            _ell(hi, rows, found)
            found["parts"] += 1.0 if rows else 0.0
            lo, hi = hi, hi * 2
        _csr(stats, width, stats.max_row, found)
        return found
    if kind == "bsr+csr":
        size = int(rest.split("x")[0])
        block = stats.blocks[size]
        left = max(0.0, nnz - block.dense_entries)
        # The rest keeps each row's share of what the blocks leave: CSR's row-length
        # classes, scaled (taking its rows as of even length made a power-law graph's
        # rest look like long rows, cheaper per entry than its CSR: 0.4x CSR measured).
        _csr(stats, 0, stats.max_row, found)
        share = left / nnz if nnz else 0.0
        for name in [f for f in found if f.startswith("csr.entries")]:
            found[name] *= share
        found[f"bsr{size}.values"] = block.dense_blocks * size * size
        found[f"bsr{size}.blocks"] = block.dense_blocks
        found["parts"] = 2.0
        return found
    raise SparsecompError(f"no cost model for layout '{layout}'")


def predict(
    layout: str,
    stats: MatrixStats,
    op: str,
    k: int,
    coefficients: Coefficients,
    device: str = "host",
) -> float:
    """Predicted seconds of one ``op`` call over ``layout`` (see the module)."""
    table = coefficients.get(op) or DEFAULTS[device][op]
    width = 1 if op == "spmv" else k
    return predicted(table, features(layout, stats, width, device), width)


def predicted(table: dict[str, list[float]], amounts: dict[str, float], width: int) -> float:
    """``call + sum(x_f * (a_f + b_f * width))`` over the features' ``amounts``; infinite
    where a feature has no coefficient (never measured: not a candidate here)."""
    a, b = table.get("call", [0.0, 0.0])
    total = a + b * width
    for name, amount in amounts.items():
        if name not in table:
            return math.inf
        a, b = table[name]
        total += amount * (a + b * width)
    return total


def calibration_path(device: str = "host") -> Path:
    from sparsecomp import knobs

    return knobs.cache_dir() / "calibration" / f"{device}.json"


def load_coefficients(device: str = "host") -> tuple[Coefficients, str]:
    """The calibration of ``device`` (``"host"``, ``"cuda"``) and where it came from (a
    file, or the defaults).

    A file made for another version of the model's features (:data:`MODEL`) is
    not used: ``python -m sparsecomp.tools.calibrate`` makes a new one."""
    path = calibration_path(device)
    if path.is_file():
        try:
            found = json.loads(path.read_text())
            if found.get("model") == MODEL:
                return found["coefficients"], str(path)
        except (OSError, ValueError, KeyError):
            pass
    return DEFAULTS[device], "the development machine's defaults"


def choose(
    A: Any,
    op: str = "spmm",
    k: int = 64,
    target: str = "host",
    *,
    stats: MatrixStats | None = None,
    coefficients: Coefficients | None = None,
) -> Choice:
    """The layout predicted fastest for ``op`` on ``A``, a scipy.sparse matrix.

    ``op`` is ``"spmm"`` or ``"sddmm"`` with ``k`` dense columns, or
    ``"spmv"``; ``target`` is ``"host"`` (this machine's calibrated model) or
    a CUDA target (``"cuda:sm_80"``: the GPU's model). ``stats`` and
    ``coefficients`` override what is measured and loaded (for tests and
    benchmarks). The model, its calibration and the margin that keeps the
    choice from being worse than CSR are described in
    :mod:`sparsecomp.formats.choice`.
    """
    start = time.perf_counter()
    if op not in ("spmm", "spmv", "sddmm"):
        raise SparsecompError(f"choose() knows spmm, spmv and sddmm, not '{op}'")
    if k < 1:
        raise SparsecompError(
            f"choose(): k, the dense operand's columns, must be at least 1, got {k}"
        )
    if stats is None and len(getattr(A, "shape", ())) != 2:
        shape = getattr(A, "shape", None)
        raise SparsecompError(f"choose() takes a matrix, not an operand of shape {shape}")
    device = device_of(target)
    stats = stats if stats is not None else matrix_stats(A, nm=device == "cuda")
    coefficients = coefficients if coefficients is not None else load_coefficients(device)[0]
    estimates = {
        c: predict(c, stats, op, k, coefficients, device) for c in candidates(stats, op, device)
    }
    estimates = dict(sorted(estimates.items(), key=lambda item: item[1]))
    best = next(iter(estimates))
    csr = estimates["csr"]
    if best != "csr" and not estimates[best] < (1 - MARGIN) * csr:
        best = "csr"
    why = _why(best, stats, estimates)
    balance = None
    if device == "cuda" and best == "csr" and op in BALANCED_OPS:
        balance, reason = choose_balance(stats, op)
        why = f"{why}; on the GPU {reason}"
    return Choice(best, why, time.perf_counter() - start, estimates, op, k, balance=balance)


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
#: Its last-level cache reads 300 MB, which no calibration matrix spills, so
#: ``stream.bytes`` comes from the calibration before (a 2-core machine whose
#: cache the bigger matrices did spill).
DEFAULT: Coefficients = {
    "sddmm": {
        "bsr16.blocks": [0, 0],
        "bsr16.values": [1.844e-09, 2.868e-11],
        "bsr2.blocks": [0, 1.568e-10],
        "bsr2.values": [2.213e-09, 0],
        "bsr3.blocks": [1.863e-08, 2.993e-10],
        "bsr3.values": [0, 0],
        "bsr4.blocks": [0, 4.816e-10],
        "bsr4.values": [1.959e-09, 0],
        "bsr6.blocks": [6.33e-08, 1.252e-09],
        "bsr6.values": [0, 0],
        "bsr8.blocks": [1.342e-07, 1.967e-09],
        "bsr8.values": [0, 0],
        "call": [0.0001015, 4.579e-06],
        "csr.entries.long": [2.193e-09, 3.463e-11],
        "csr.entries.mid": [4.428e-09, 0],
        "csr.entries.short": [0, 0],
        "csr.rows": [0, 0],
        "ell.rows": [0, 0],
        "ell.slots.long": [2.579e-09, 0],
        "ell.slots.mid": [5.145e-09, 0],
        "gather.miss": [8.209e-09, 1.338e-10],
        "stream.bytes": [1.047e-09, 7.186e-12],
    },
    "spmm": {
        "bsr16.blocks": [0, 0],
        "bsr16.values": [5.585e-11, 1.663e-11],
        "bsr2.blocks": [0, 0],
        "bsr2.values": [0, 2.155e-11],
        "bsr3.blocks": [0, 1.578e-10],
        "bsr3.values": [0, 0],
        "bsr4.blocks": [0, 2.54e-10],
        "bsr4.values": [0, 0],
        "bsr6.blocks": [0, 5.672e-10],
        "bsr6.values": [0, 0],
        "bsr8.blocks": [7.868e-09, 1.417e-09],
        "bsr8.values": [0, 0],
        "call": [0, 2.024e-06],
        "csr.entries.long": [0, 3.724e-11],
        "csr.entries.mid": [9.701e-10, 0],
        "csr.entries.short": [0, 0],
        "csr.rows": [3.171e-11, 2.057e-10],
        "dense.cells": [0, 1.029e-09],
        "ell.rows": [0, 0],
        "ell.slots.long": [3.613e-10, 1.705e-11],
        "ell.slots.mid": [1.001e-09, 6.783e-12],
        "ell.slots.short": [0, 1.732e-10],
        "gather.miss": [1.749e-10, 1.376e-10],
        "parts": [0, 1.366e-07],
        "stream.bytes": [0, 1.312e-11],
    },
    "spmv": {
        "bsr16.blocks": [2.429e-08, 0],
        "bsr16.values": [0, 0],
        "bsr2.blocks": [2.535e-09, 0],
        "bsr2.values": [0, 0],
        "bsr3.blocks": [2.449e-09, 0],
        "bsr3.values": [0, 0],
        "bsr4.blocks": [3.084e-09, 0],
        "bsr4.values": [0, 0],
        "bsr6.blocks": [5.808e-09, 0],
        "bsr6.values": [0, 0],
        "bsr8.blocks": [8.811e-09, 0],
        "bsr8.values": [0, 0],
        "call": [0, 0],
        "csr.entries.long": [2.358e-10, 0],
        "csr.entries.mid": [4.969e-10, 0],
        "csr.entries.short": [3.591e-09, 0],
        "csr.rows": [1.571e-09, 0],
        "dense.cells": [8.239e-10, 0],
        "ell.rows": [4.281e-09, 0],
        "ell.slots.long": [2.654e-10, 0],
        "ell.slots.mid": [3.077e-10, 0],
        "ell.slots.short": [8.463e-10, 0],
        "gather.miss": [1.926e-09, 0],
        "parts": [0, 0],
        "stream.bytes": [6.861e-11, 0],
    },
}

#: The GPU's coefficients: fitted to the emulator's H100 roofline estimates
#: (`python -m sparsecomp.tools.calibrate --target cuda:sm_80`).
DEFAULT_CUDA: Coefficients = {
    "sddmm": {
        "bsr16.blocks": [2.569e-09, 3.264e-09],
        "bsr16.values": [0, 0],
        "bsr2.blocks": [0, 4.973e-11],
        "bsr2.values": [1.184e-11, 0],
        "bsr4.blocks": [0, 1.967e-10],
        "bsr4.values": [1.151e-11, 0],
        "bsr8.blocks": [0, 8.41e-10],
        "bsr8.values": [1.06e-11, 0],
        "call": [0, 0],
        "csr.entries.long": [1.458e-11, 7.199e-13],
        "csr.entries.mid": [2.144e-11, 8.786e-13],
        "csr.entries.short": [2.701e-11, 3.998e-13],
        "csr.rows": [0, 0],
        "ell.rows": [0, 6.144e-11],
        "ell.slots.long": [3.184e-12, 4.622e-12],
        "ell.slots.mid": [3.428e-12, 5.273e-12],
    },
    "spmm": {
        "bsr16.blocks": [4.34e-10, 0],
        "bsr16.values": [0, 5.336e-14],
        "bsr2.blocks": [0, 5.706e-11],
        "bsr2.values": [0, 0],
        "bsr4.blocks": [3.578e-11, 1.412e-10],
        "bsr4.values": [0, 0],
        "bsr8.blocks": [6.653e-11, 5.684e-10],
        "bsr8.values": [0, 0],
        "call": [0, 0],
        "csr.entries.long": [8.537e-12, 2.983e-13],
        "csr.entries.mid": [7.464e-12, 9.844e-14],
        "csr.entries.short": [0, 0],
        "csr.rows": [0, 2.56e-12],
        "ell.rows": [3.765e-12, 0],
        "ell.slots.long": [9.097e-12, 1.85e-13],
        "ell.slots.mid": [9.294e-12, 4.63e-13],
        "ell.slots.short": [0, 4.696e-12],
        "nm.rows": [3.672e-09, 0],
        "nm.slots": [0, 0],
        "parts": [7.72e-09, 4.335e-09],
    },
    "spmv": {
        "bsr16.blocks": [2.494e-09, 0],
        "bsr16.values": [0, 0],
        "bsr2.blocks": [3.794e-11, 0],
        "bsr2.values": [0, 0],
        "bsr4.blocks": [1.296e-10, 0],
        "bsr4.values": [0, 0],
        "bsr8.blocks": [5.746e-10, 0],
        "bsr8.values": [0, 0],
        "call": [0, 0],
        "csr.entries.long": [1.945e-12, 0],
        "csr.entries.mid": [3.84e-12, 0],
        "csr.entries.short": [2.761e-11, 0],
        "csr.rows": [9.225e-13, 0],
        "ell.rows": [0, 0],
        "ell.slots.long": [1.865e-12, 0],
        "ell.slots.mid": [3.733e-12, 0],
        "ell.slots.short": [3.231e-11, 0],
        "parts": [1.471e-10, 0],
    },
}

DEFAULTS = {"host": DEFAULT, "cuda": DEFAULT_CUDA}
