"""How far any CSR SpMV can get ahead of the upstream sparsifier's: its floor.

Run: ``.venv/bin/python benchmarks/spmv_floor.py [--matrices a,b] [--rounds 5]
[--markdown FILE]``; ``--quick``: tiny matrices (the smoke test).

An SpMV over a CSR matrix, whatever its schedule, reads every position,
coordinate and value once and writes y. The *floor* kernel
(``kernels/spmv_floor.mlir``: ``y_i = sum_j A_ij * j``, compiled by
sparsecomp like the SpMV) does exactly that and nothing else: no gathers of
x. Its time bounds what a CSR kernel in the same layout could take, so
``upstream / floor`` bounds the speedup of *any* CSR SpMV over the upstream
sparsifier's kernel (best flags, OpenMP: ``peers.upstream``), where the
matrix is read at the speed its size allows (this machine's caches
included). Printed per matrix beside sparsecomp's SpMV and torch's:
``upstream / sparsecomp`` is what we get, ``upstream / floor`` the most
there is. Timing as in ``cpu.py``: rounds over the kernels, each turn a
warm-up call and calls for at least ``--min-time`` seconds, best call kept.
Every kernel's result is checked against scipy's first.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import matrices
import numpy as np

HERE = Path(__file__).resolve().parent
#: The floor must not beat a kernel by skipping a check on numbers: the same tolerance.
RTOL = 1e-4


def _best(calls: dict[str, Callable[[], object]], rounds: int, min_time: float) -> dict[str, float]:
    best = dict.fromkeys(calls, float("inf"))
    for r in range(rounds):
        names = list(calls)
        names = names[r % len(names) :] + names[: r % len(names)]
        for name in names:
            call = calls[name]
            time.sleep(0.05)
            call()
            start, count = time.perf_counter(), 0
            while count < 3 or time.perf_counter() - start < min_time:
                t0 = time.perf_counter()
                call()
                best[name] = min(best[name], time.perf_counter() - t0)
                count += 1
    return best


def _check(name: str, got: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> None:
    if not np.all(np.abs(got - ref) <= RTOL * bound + 1e-30):
        raise SystemExit(f"{name}: result differs from scipy's")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny matrices (smoke test)")
    parser.add_argument("--matrices", default="", help="comma-separated names (default: all)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (5; quick: 1)")
    parser.add_argument("--min-time", type=float, default=None, help="s per turn (0.05)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 5)
    min_time = args.min_time if args.min_time is not None else (0.0 if args.quick else 0.05)
    if "SPARSECOMP_CACHE_DIR" not in os.environ:  # a cache of its own, removed at the end
        cache = tempfile.mkdtemp(prefix="spmv-floor-")
        atexit.register(shutil.rmtree, cache, True)
        os.environ["SPARSECOMP_CACHE_DIR"] = cache

    from peers import Case, Unavailable
    from peers.torch_cpu import TorchPeer
    from peers.upstream import UpstreamPeer

    import sparsecomp
    from sparsecomp.formats import SparseTensor

    spmv = sparsecomp.compile(HERE / "kernels" / "spmv.mlir")
    floor = sparsecomp.compile(HERE / "kernels" / "spmv_floor.mlir")
    upstream = UpstreamPeer("best")
    try:
        torch: TorchPeer | None = TorchPeer()
    except Exception:  # torch is an optional peer (pip install -e '.[bench]')
        torch = None
    wanted = {m for m in args.matrices.split(",") if m}
    specs = [s for s in matrices.suite(quick=args.quick) if not wanted or s.name in wanted]
    lines = [
        "| matrix | nnz | floor ms | sparsecomp ms | upstream ms | torch ms "
        "| upstream / sparsecomp | upstream / floor | sparsecomp / floor |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ours_ratios, floor_ratios = [], []
    for spec in specs:
        a = spec.build()
        x = np.random.default_rng(7).standard_normal(a.shape[1], dtype=np.float32)
        t = SparseTensor.from_scipy(a, "csr")
        cols = np.arange(a.shape[1], dtype=np.float32)
        _check("floor", floor.spmv_floor(t), a @ cols, abs(a) @ cols)
        _check("sparsecomp", spmv.spmv(t, x), a @ x, abs(a) @ abs(x))
        case = Case("spmv", spec.name, a, (x,))
        calls: dict[str, Callable[[], object]] = {
            "floor": lambda t=t: floor.spmv_floor(t),
            "sparsecomp": lambda t=t, x=x: spmv.spmv(t, x),
            "upstream": upstream.prepare(case),
        }
        _check("upstream", np.asarray(calls["upstream"]()), a @ x, abs(a) @ abs(x))
        if torch is not None:
            try:
                calls["torch"] = torch.prepare(case)
            except Unavailable:  # torch is not installed: the column says n/a
                torch = None
        best = _best(calls, rounds, min_time)
        ours_ratios.append(best["upstream"] / best["sparsecomp"])
        floor_ratios.append(best["upstream"] / best["floor"])
        torch_ms = f"{best['torch'] * 1e3:.3f}" if "torch" in best else "n/a"
        lines.append(
            f"| {spec.name} | {a.nnz} | {best['floor'] * 1e3:.3f} | {best['sparsecomp'] * 1e3:.3f} "
            f"| {best['upstream'] * 1e3:.3f} | {torch_ms} | {ours_ratios[-1]:.2f} "
            f"| {floor_ratios[-1]:.2f} | {best['sparsecomp'] / best['floor']:.2f} |"
        )
        print(f"# {spec.name} done", file=sys.stderr, flush=True)
    upstream.close()

    def geomean(values: list[float]) -> float:
        return float(np.exp(np.mean(np.log(values))))

    ours, most = geomean(ours_ratios), geomean(floor_ratios)
    lines.append(f"| geomean | | | | | | **{ours:.2f}** | **{most:.2f}** | |")
    command = " ".join(sys.argv[1:] if argv is None else argv)
    out = "\n".join(
        [
            "## SpMV floor",
            "",
            f"`benchmarks/spmv_floor.py {command}`, {os.cpu_count()} cores, best of {rounds}"
            " rounds, ms. `upstream / floor`: the most any CSR SpMV could gain over the"
            " upstream sparsifier's kernel on that matrix.",
            "",
            *lines,
        ]
    )
    print(out)
    if args.markdown:
        args.markdown.write_text(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
