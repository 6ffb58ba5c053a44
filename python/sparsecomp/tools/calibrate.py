"""``python -m sparsecomp.tools.calibrate``: measure this machine for the layout cost model.

Compiles SpMM, SpMV and SDDMM for every candidate layout
(:func:`sparsecomp.formats.choice.candidates`), times each on a few
synthetic matrices chosen so that every feature of the model varies
(short even rows, power-law rows, dense 3x3, 6x6, 8x8 and 16x16 blocks, a band, a
27-point stencil, longer random rows, a 2:4-pruned and a 30%-dense
matrix, and two bigger than a last-level cache), and fits the
coefficients of :mod:`sparsecomp.formats.choice` by non-negative least
squares, one op at a
time (SpMM and SDDMM at k = 32 and 128 to separate the per-unit cost from
its growth with ``k``). The result is written to
``$SPARSECOMP_CACHE_DIR/calibration/host.json``, where
``sparsecomp.formats.choose`` finds it, with every measurement. About
three minutes on two cores, compiles included; ``--quick`` uses smaller
matrices. ``--refit`` times nothing: after a change of the model's
features it computes them again for the stored measurements and fits anew
(candidates the new model adds stay unmeasured until the next calibration).
``--show`` measures nothing and prints the stored coefficients.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp  # type: ignore[import-untyped]

from sparsecomp.formats import SparseTensor
from sparsecomp.formats.choice import (
    MODEL,
    Coefficients,
    calibration_path,
    candidates,
    features,
    predicted,
)
from sparsecomp.formats.programs import program
from sparsecomp.formats.stats import matrix_stats

#: (op, k) pairs measured.
RUNS = (("spmm", 32), ("spmm", 128), ("spmv", 1), ("sddmm", 32), ("sddmm", 128))


def _rows(lengths: np.ndarray, cols: int, rng: np.random.Generator) -> sp.csr_matrix:
    lengths = np.minimum(lengths, cols)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = rng.integers(0, cols, int(indptr[-1]), dtype=np.int32)
    data = rng.standard_normal(indices.size).astype(np.float32)
    a = sp.csr_matrix((data, indices, indptr), shape=(len(lengths), cols))
    a.sum_duplicates()
    return a


def _blocks(n: int, size: int, fill: float, count: int, rng: np.random.Generator) -> sp.csr_matrix:
    grid = n // size
    at = np.unique(rng.integers(0, grid * grid, count))
    mask = rng.random((at.size, size, size)) < fill
    b, r, c = np.nonzero(mask)
    rows = (at[b] // grid) * size + r
    cols = (at[b] % grid) * size + c
    data = rng.standard_normal(rows.size).astype(np.float32)
    return sp.csr_matrix((data, (rows, cols)), shape=(n, n))


def matrices(scale: float, rng: np.random.Generator) -> dict[str, sp.csr_matrix]:
    """The calibration matrices, ``scale`` times their default size."""
    n = int(40_000 * scale)
    d = int(1024 * max(scale, 0.25))
    dense = rng.standard_normal((d, d)).astype(np.float32)
    pruned = dense.copy()
    order = np.argsort(np.abs(pruned.reshape(d, d // 4, 4)), axis=2)
    np.put_along_axis(pruned.reshape(d, d // 4, 4), order[:, :, :2], 0, axis=2)
    grid = max(8, int(24 * scale ** (1 / 3)))
    line = sp.diags([np.ones(grid)] * 3, [-1, 0, 1], shape=(grid, grid))
    plane = sp.kron(line, line)
    stencil = sp.csr_matrix(sp.kron(plane, line), dtype=np.float32)  # 27 points
    band = sp.diags([np.ones(n, np.float32)] * 9, list(range(-4, 5)), shape=(n, n), format="csr")
    return {
        "uniform": _rows(rng.poisson(8, n), n, rng),
        "powerlaw": _rows(np.minimum(rng.zipf(1.8, n), n // 4), n, rng),
        # node blocks of an FEM matrix (3 and 6 unknowns a node), nearly full
        "blocks3": _blocks(n // 4, 3, 0.95, int(n / 2), rng),
        "blocks6": _blocks(n // 4, 6, 0.85, int(n / 6), rng),
        "blocks8": _blocks(n // 4, 8, 0.7, int(n / 8), rng),
        "blocks16": _blocks(n // 4, 16, 0.9, int(n / 32), rng),
        "band": band.astype(np.float32),
        "stencil": stencil,
        "uniform32": _rows(rng.poisson(32, n // 4), n, rng),
        # bigger than a last-level cache: the layouts' bytes come from memory
        "uniform_big": _rows(rng.poisson(8, 10 * n), 10 * n, rng),
        "halfdense": sp.random(3 * d, 3 * d, 0.5, format="csr", dtype=np.float32, random_state=2),
        "2:4": sp.csr_matrix(pruned),
        "dense30": sp.random(d, d, 0.3, format="csr", dtype=np.float32, random_state=1),
    }


def best_time(call: Callable[[], Any], reps: int) -> float:
    call()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


class Runner:
    """How one target compiles and measures: the host's wall time (best of ``reps``)."""

    target = "host"
    device = "host"
    runs: tuple[tuple[str, int], ...] = RUNS
    #: the candidate layouts measured (None: all)
    layouts: tuple[str, ...] | None = None

    def __init__(self, reps: int) -> None:
        self.reps = reps

    def compile(self, op: str, layout: str) -> Any:
        import sparsecomp

        return sparsecomp.compile(program(op, layout), self.target)

    def seconds(self, exe: Any, args: tuple[Any, ...]) -> float:
        return best_time(lambda: exe(*args), self.reps)

    def candidates(self, stats: Any, op: str) -> list[str]:
        found = candidates(stats, op, self.device)
        return [c for c in found if self.layouts is None or c in self.layouts]


class EmulatedGpu(Runner):
    """The GPU without one: each kernel under ``cuda-emu`` with the profiler, its time the
    H100 roofline estimate of the traffic it counts (``Profile.h100_seconds``)."""

    device = "cuda"
    runs = (("spmm", 4), ("spmm", 16), ("spmv", 1), ("sddmm", 4), ("sddmm", 16))

    def __init__(self, target: str) -> None:
        super().__init__(1)
        self.target = target.replace("cuda:", "cuda-emu:")

    def compile(self, op: str, layout: str) -> Any:
        import sparsecomp

        return sparsecomp.compile(program(op, layout), self.target, profile=True)

    def seconds(self, exe: Any, args: tuple[Any, ...]) -> float:
        return float(exe.profile(*args).h100_seconds)


def measure(
    mats: dict[str, sp.csr_matrix], runner: Runner, log: Callable[[str], None], scale: float = 1.0
) -> list[dict[str, Any]]:
    """One record per (op, k, matrix, layout, at ``scale``): its features and its time."""
    from sparsecomp.errors import SparsecompError

    rng = np.random.default_rng(7)
    records = []
    kernels: dict[tuple[str, str], Any] = {}
    for name, a in mats.items():
        stats = matrix_stats(a)
        m, n = a.shape
        for op, _ in runner.runs:  # compiles first: a build's tail would slow the timings
            for layout in runner.candidates(stats, op):
                if (op, layout) not in kernels:
                    try:
                        kernels[op, layout] = runner.compile(op, layout)
                    except SparsecompError as why:
                        kernels[op, layout] = None
                        log(f"{op} over {layout}: not measured ({str(why).splitlines()[0]})")
        for op, k in runner.runs:
            for layout in runner.candidates(stats, op):
                exe = kernels[op, layout]
                if exe is None:
                    continue
                packed = a.toarray() if layout == "dense" else SparseTensor.from_scipy(a, layout)
                if op == "spmm":
                    args: tuple[Any, ...] = (packed, rng.standard_normal((n, k)).astype(np.float32))
                elif op == "spmv":
                    args = (packed, rng.standard_normal(n).astype(np.float32))
                else:
                    xs = rng.standard_normal((m, k)).astype(np.float32)
                    args = (packed, xs, rng.standard_normal((n, k)).astype(np.float32))
                seconds = runner.seconds(exe, args)
                record = {"op": op, "k": k, "matrix": name, "layout": layout,
                          "seconds": seconds, "scale": scale}  # fmt: skip
                records.append({**record, "features": features(layout, stats, k, runner.device)})
                log(f"{op:5} k={k:<3} {name:8} {layout:12} {seconds * 1e3:.4g} ms")
    return records


def refeature(
    records: list[dict[str, Any]], mats: dict[str, sp.csr_matrix], device: str
) -> list[dict[str, Any]]:
    """``records`` with their features computed again by the current model (the same
    matrices: :func:`matrices` is deterministic for a scale)."""
    stats = {name: matrix_stats(a) for name, a in mats.items()}
    return [
        {**r, "features": features(r["layout"], stats[r["matrix"]], r["k"], device)}
        for r in records
    ]


def _scale_of(records: list[dict[str, Any]], device: str) -> float:
    """The scale the records were measured at (each kept with them since model 4; before,
    the full size of ``device``)."""
    found = {r.get("scale") for r in records}
    scale = found.pop() if len(found) == 1 else None
    return float(scale) if scale is not None else 1.0 if device == "host" else 0.04


def fit(records: list[dict[str, Any]]) -> Coefficients:
    """Per op, the coefficients minimising the relative error of the predicted times."""
    from scipy.optimize import nnls  # type: ignore[import-untyped]

    found: Coefficients = {}
    for op in sorted({r["op"] for r in records}):
        rows = [r for r in records if r["op"] == op]
        names = ["call", *sorted({f for r in rows for f in r["features"]})]
        columns = [(name, grows) for name in names for grows in (False, True)]
        if op == "spmv":
            columns = [(name, False) for name in names]
        matrix = np.zeros((len(rows), len(columns)))
        for i, r in enumerate(rows):
            amounts = {"call": 1.0, **r["features"]}
            width = 1 if op == "spmv" else r["k"]
            for j, (name, grows) in enumerate(columns):
                matrix[i, j] = amounts.get(name, 0.0) * (width if grows else 1.0)
        times = np.array([r["seconds"] for r in rows])
        weights = 1.0 / times  # relative error: every case counts alike
        scaled = matrix * weights[:, None]
        norms = np.maximum(scaled.max(axis=0), 1e-30)
        solution, _ = nnls(scaled / norms, times * weights)
        solution /= norms
        table: dict[str, list[float]] = {name: [0.0, 0.0] for name in names}
        for (name, grows), value in zip(columns, solution, strict=True):
            table[name][1 if grows else 0] = float(value)
        found[op] = table
    return found


def report(records: list[dict[str, Any]], coefficients: Coefficients) -> str:
    """Median and worst relative error of the fitted model on the measurements."""
    lines = []
    for op in coefficients:
        errors = []
        for r in (r for r in records if r["op"] == op):
            width = 1 if op == "spmv" else r["k"]
            estimate = predicted(coefficients[op], r["features"], width)
            errors.append(abs(estimate / r["seconds"] - 1))
        lines.append(f"{op}: median error {100 * np.median(errors):.0f}%, "
                     f"worst {100 * max(errors):.0f}% over {len(errors)} cases")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller matrices")
    parser.add_argument("--reps", type=int, default=5, help="timed calls per case (best)")
    parser.add_argument(
        "--print",
        action="store_true",
        help="after calibrating, also print the fitted coefficients (JSON) on stdout",
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="measure nothing: print the stored calibration's coefficients (JSON) and exit",
    )
    parser.add_argument(
        "--refit",
        action="store_true",
        help="time nothing: recompute the features of the last calibration's measurements "
        "with the current model and fit again (after a change of the features)",
    )
    parser.add_argument(
        "--target",
        default="host",
        help="'host' (default), or cuda:sm_80 / cuda:sm_90: the GPU's model, measured as "
        "the emulator's H100 roofline estimates on small matrices (no GPU needed)",
    )
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.show:
        device = "host" if args.target == "host" else "cuda"
        stored = calibration_path(device)
        if not stored.is_file():
            print(f"calibrate: no calibration at {stored}", file=sys.stderr)
            return 1
        print(json.dumps(json.loads(stored.read_text())["coefficients"], indent=1))
        return 0
    start = time.perf_counter()
    if args.target == "host":
        runner = Runner(args.reps)
        scale = 0.25 if args.quick else 1.0
    else:
        runner = EmulatedGpu(args.target)
        scale = 0.02 if args.quick else 0.04
    path = calibration_path(runner.device)
    if args.refit:
        records = json.loads(path.read_text())["records"]
        scale = _scale_of(records, runner.device)
    mats = matrices(scale, np.random.default_rng(0))
    if runner.device == "cuda":
        for big in ("uniform_big", "halfdense", "dense30"):  # no caches, no dense
            mats.pop(big)
    if args.refit:
        records = refeature(records, mats, runner.device)
    else:
        records = measure(mats, runner, log, scale)
    coefficients = fit(records)
    path.parent.mkdir(parents=True, exist_ok=True)
    found = {"model": MODEL, "coefficients": coefficients, "records": records}
    path.write_text(json.dumps(found, indent=1))
    log(report(records, coefficients))
    log(f"calibrated in {time.perf_counter() - start:.0f} s: {path}")
    if args.print:
        print(json.dumps(coefficients, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
