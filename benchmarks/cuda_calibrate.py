"""Calibrate the emulator's GPU time estimate against times measured on a GPU (issue 41, item 7).

Two steps, so that the code that was timed can be profiled (a checkout of the
commit the GPU ran) and the fit run from this one:

``profile``: ``.venv/bin/python benchmarks/cuda_calibrate.py profile --out F.json``
    profiles each case the GPU run timed (SpMV, SpMM with K = 32 and 128,
    SDDMM with K = 32; ``examples/<op>.mlir``) on each matrix of the GPU
    benchmark (:mod:`matrices` at full size and R-MAT 2^20) under
    ``cuda-emu:sm_90`` with ``profile=True``, checks each result against
    scipy, and writes what :mod:`sparsecomp.runtime.profile` counted per case
    (sectors, warp requests, the busiest warp's, the warps, atomics, ...).
    Large cases sample blocks (``--max-records``; ``Profile.sampled``).

``fit``: ``.venv/bin/python benchmarks/cuda_calibrate.py fit [--profiles F.json]``
    (default: ``benchmarks/data/h100-2026-11-27-profiles.json``, the profiles
    of the code the H100 run timed) fits the coefficients of
    :func:`sparsecomp.runtime.gpu_model.estimate_seconds` to the measured
    times (``--measured``, default ``benchmarks/data/h100-2026-11-27.csv``:
    the H100 table of docs/benchmarks.md, our kernels' medians of 20 calls;
    or a later run's ``cuda.md``, as ``benchmarks/cuda.py --markdown`` wrote
    it), and reports per op
    Spearman's rank correlation across the matrices of the estimate with the
    measured times: with the coefficients fitted to all cases, with each
    matrix's cases left out of the fit that predicts them (the honest figure),
    and of the plain roofline (``Profile.h100_seconds``) for comparison.
    ``--markdown FILE`` writes the table; the coefficients print as
    :data:`sparsecomp.runtime.gpu_model.H100_MODEL` takes them.

``predict``: ``.venv/bin/python benchmarks/cuda_calibrate.py predict A.json [B.json ...]``
    each profiled case's estimate, a column per file (say, HEAD's kernels
    beside the code the GPU ran, or ``profile --balance nonzeros``'s split
    schedules beside the row ones), and the measured time where the GPU run
    has the case.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: The cases the GPU run timed: (op, K), K None for SpMV.
CASES = (("spmv", None), ("spmm", 32), ("spmm", 128), ("sddmm", 32))
MEASURED = HERE / "data" / "h100-2026-11-27.csv"
#: The profile step's output for the code that run timed (a checkout of 2ed51de).
PROFILES = HERE / "data" / "h100-2026-11-27-profiles.json"
EXAMPLES = HERE.parent / "examples"


def _specs(chosen: set[str]) -> list[Any]:
    import matrices

    specs = matrices.suite()
    specs.append(matrices.Spec("rmat20", "R-MAT 2^20", lambda: matrices.rmat(20)))
    return [s for s in specs if not chosen or s.name in chosen]


def _check(op: str, args: tuple, result: Any) -> None:
    if op == "sddmm":  # at the stored entries only (x @ y.T is too large to form)
        a, x, y = args
        got = result.to_scipy() if hasattr(result, "to_scipy") else result
        got = got.tocsr()
        got.sort_indices()
        a = a.tocsr()
        a.sort_indices()
        assert np.array_equal(got.indices, a.indices), "SDDMM's result has another pattern"
        rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
        for lo in range(0, a.nnz, 1 << 20):
            hi = min(a.nnz, lo + (1 << 20))
            want = a.data[lo:hi] * np.einsum("ij,ij->i", x[rows[lo:hi]], y[a.indices[lo:hi]])
            scale = 1 + float(np.abs(want).max(initial=0))
            assert float(np.abs(got.data[lo:hi] - want).max()) <= 1e-3 * scale, "SDDMM differs"
        return
    want = args[0] @ args[1]
    scale = 1 + float(np.abs(want).max(initial=0))
    assert float(np.abs(np.asarray(result) - want).max()) <= 1e-3 * scale, f"{op} differs"


def _profile(exe: Any, args: tuple, max_records: int) -> Any:
    try:
        return exe.profile(*args, max_records=max_records)
    except TypeError:  # a checkout from before max_records: its default limit
        return exe.profile(*args)


def profile(argv: argparse.Namespace) -> int:
    from cuda_programs import operands

    import sparsecomp

    chosen = set(filter(None, argv.matrices.split(",")))
    split = argv.balance == "nonzeros"
    ops = set(filter(None, argv.ops.split(","))) or {op for op, _ in CASES}
    cases = [(op, k) for op, k in CASES if op in ops]
    options = {"gpu_balance": "nonzeros"} if split else {}
    exes = {
        op: sparsecomp.compile(EXAMPLES / f"{op}.mlir", argv.target, profile=True, **options)
        for op in {op for op, _ in cases}
    }
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for spec in _specs(chosen):
        a = spec.build()
        for op, k in cases:
            args = operands(op, a, k, rng)
            started = time.perf_counter()
            prof = _profile(exes[op], args, argv.max_records)
            _check(op, args, prof.result)
            t = prof.total
            rows.append({
                "op": op + ("-split" if split else ""), "k": k, "matrix": spec.name,
                "rows": a.shape[0], "nnz": int(a.nnz),
                "sectors": t.sectors, "load_sectors": prof.loads.sectors,
                "store_sectors": prof.stores.sectors, "requests": t.requests,
                "shared_requests": prof.shared_requests, "atomics": prof.atomics,
                "longest_warp": prof.longest_warp, "mean_warp": prof.mean_warp,
                "warps": getattr(prof, "warps", 0),
                "launches": len({s // 1000 for s in prof.sites}),
                "lanes": t.lane_utilization, "sampled": getattr(prof, "sampled", 1.0),
                "roofline_s": prof.h100_seconds,
            })  # fmt: skip
            print(f"{spec.name:15s} {op:5s} K={k or '-':<4} sectors {t.sectors:>11,d} "
                  f"busiest warp {prof.longest_warp:>8,d} sampled {rows[-1]['sampled']:.3f} "
                  f"({time.perf_counter() - started:.1f} s)", flush=True)  # fmt: skip
            argv.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def measured(path: Path) -> dict[tuple[str, int | None, str], float]:
    """``(op, K, matrix) -> seconds`` of our kernels in a GPU run: its CSV (``op,k,matrix,
    ours_ms,...``), or the markdown table ``benchmarks/cuda.py --markdown`` wrote
    (``| op | matrix | ours ms | peer | peer ms | ratio |``, ``spmm K=32`` ops)."""
    if path.suffix == ".md":
        found = {}
        for line in path.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 6 or not line.startswith(("| sp", "| sd")):
                continue
            op, _, k = cells[0].partition(" K=")
            try:
                found[op, int(k) if k else None, cells[1]] = float(cells[2]) * 1e-3
            except ValueError:  # a failed case's row
                continue
        return found
    with path.open() as f:
        return {
            (r["op"], int(r["k"]) if r["k"] else None, r["matrix"]): float(r["ours_ms"]) * 1e-3
            for r in csv.DictReader(f)
        }


def _features(row: dict[str, Any]) -> dict[str, float]:
    """What :meth:`Profile.model_features` gives, from a profiled case's counts."""
    return {
        "launches": row["launches"],
        "bytes": 32.0 * row["sectors"],
        "requests": row["requests"] + row["shared_requests"],
        "busiest": row["longest_warp"],
    }


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (ties ranked by order; none occur in these times)."""
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def fit(argv: argparse.Namespace) -> int:
    from sparsecomp.runtime import gpu_model

    times = measured(argv.measured)
    rows = [r for r in json.loads(argv.profiles.read_text())
            if (r["op"], r["k"], r["matrix"]) in times]  # fmt: skip
    features = [_features(r) for r in rows]
    t = np.array([times[(r["op"], r["k"], r["matrix"])] for r in rows])
    ops = [(r["op"], r["k"]) for r in rows]
    model = gpu_model.fit(features, t)
    lines = [
        f"Calibrated against {argv.measured.name} ({len(rows)} cases); Spearman's rho across "
        "matrices of estimate and measured time",
        "",
        "| op | matrices | rho, fitted on all | rho, matrix left out | rho, roofline | "
        "median error, left out |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    matrices_ = sorted({r["matrix"] for r in rows})
    left_out = np.zeros(len(rows))
    for name in matrices_:
        keep = [i for i, r in enumerate(rows) if r["matrix"] != name]
        held = [i for i, r in enumerate(rows) if r["matrix"] == name]
        m = gpu_model.fit([features[i] for i in keep], t[keep])
        for i in held:
            left_out[i] = gpu_model.estimate_seconds(features[i], m)
    fitted = np.array([gpu_model.estimate_seconds(f, model) for f in features])
    roof = np.array([r["roofline_s"] for r in rows])
    for case in CASES:
        idx = [i for i, o in enumerate(ops) if o == case]
        if len(idx) < 3:
            continue
        error = np.median(np.abs(left_out[idx] / t[idx] - 1))
        name = case[0] + (f" K={case[1]}" if case[1] else "")
        lines.append(
            f"| {name} | {len(idx)} | {spearman(fitted[idx], t[idx]):.2f} | "
            f"{spearman(left_out[idx], t[idx]):.2f} | {spearman(roof[idx], t[idx]):.2f} | "
            f"{error:.0%} |"
        )
    text = "\n".join(lines)
    print(text)
    print("\nmodel:", json.dumps(model, indent=1))
    if argv.markdown:
        argv.markdown.write_text(text + "\n")
    return 0


def predict(argv: argparse.Namespace) -> int:
    """Each profiled case's estimate (:data:`H100_MODEL`), a column per file, and the
    measured time where the GPU run has the case."""
    from sparsecomp.runtime import gpu_model

    times = measured(argv.measured)
    columns = [json.loads(p.read_text()) for p in argv.profiles]
    cases: dict[tuple[str, int | None, str], list[float | None]] = {}
    for c, rows in enumerate(columns):
        for r in rows:
            key = (r["op"].removesuffix("-split"), r["k"], r["matrix"])
            cases.setdefault(key, [None] * len(columns))[c] = (
                gpu_model.estimate_seconds(_features(r)) * 1e3
            )
    names = [f"{p.stem} ms" for p in argv.profiles]
    lines = [
        "| op | matrix | measured ms | " + " | ".join(names) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for (op, k, matrix), estimates in cases.items():
        known = times.get((op, k, matrix))
        cells = " | ".join("-" if e is None else f"{e:.3f}" for e in estimates)
        label = op + (f" K={k}" if k else "")
        lines.append(f"| {label} | {matrix} | {'-' if known is None else f'{known * 1e3:.3f}'} "
                     f"| {cells} |")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if argv.markdown:
        argv.markdown.write_text(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="step", required=True)
    a = sub.add_parser("profile", help="profile the timed cases under emulation")
    a.add_argument("--out", type=Path, required=True, help="the counts, as JSON")
    a.add_argument("--matrices", default="", help="comma-separated subset of the matrices")
    a.add_argument("--target", default="cuda-emu:sm_90")
    a.add_argument("--max-records", type=int, default=1_000_000,
                   help="accesses kept before the recorder samples blocks")  # fmt: skip
    a.add_argument("--ops", default="", help="comma-separated subset of spmv, spmm, sddmm")
    a.add_argument("--balance", choices=("rows", "nonzeros"), default="rows",
                   help="nonzeros: the entries split evenly")  # fmt: skip
    b = sub.add_parser("fit", help="fit the estimate to measured times")
    b.add_argument("--profiles", type=Path, default=PROFILES)
    b.add_argument("--measured", type=Path, default=MEASURED)
    b.add_argument("--markdown", type=Path)
    c = sub.add_parser("predict", help="the calibrated estimate of profiled cases, side by side")
    c.add_argument("profiles", type=Path, nargs="+", help="profile step outputs, one column each")
    c.add_argument("--measured", type=Path, default=MEASURED)
    c.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    return {"profile": profile, "fit": fit, "predict": predict}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
