"""The automatic layout choice against CSR and an exhaustive sweep, per matrix and op.

Run: ``.venv/bin/python benchmarks/format_choice.py [--quick] [--markdown FILE]``
(after ``python -m sparsecomp.tools.calibrate`` on this machine; without a
calibration the development machine's coefficients are used). ``--times
FILE`` keeps the measured times, so that another cost model can be judged
on the same measurements without timing again. ``--target cuda-emu:sm_80
--quick`` judges the GPU's choice the same way, each case's time being the
emulator's H100 roofline estimate of the traffic it counts (SpMM and SDDMM
at K = 16, SpMV), after ``python -m sparsecomp.tools.calibrate --target
cuda:sm_80``.

For each matrix of :mod:`matrices` (``--quick``: the small sizes; the
CPU benchmark's synthetic set, a 2^18-row band and ten real matrices) plus
an 8x8-block matrix and a circuit-like one (a diagonal, short random rows
and a few dense rows), and for SpMM (K = 32
and 128), SpMV and SDDMM (K = 32), it times the op's kernel over every
candidate layout (:func:`sparsecomp.formats.choice.candidates`; each packed
once, best of ``--reps`` calls after a warm-up, results checked against
scipy), then asks what a user gets, ``exe.prepare(A, k=K)`` (on the host:
the cost model's best few timed on a sample of the matrix,
:mod:`sparsecomp.runtime.tournament`; on ``cuda-emu``, the model alone)
and prints in one table: CSR's time, the fastest candidate and its time,
the model's pick (``sparsecomp.formats.choose`` alone), the choice, its time
and its decision time (statistics, model, packing and timing the sample;
not compiling), and the ratios choice / best and CSR / choice. The summary
gives the geomean of choice / best (target <= 1.10), the worst CSR / choice
(target >= 0.90: never more than 10% slower than CSR) and the slowest
decision; a last line times the decision on three 10M-nonzero matrices
(target < 0.1 s).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).parent))

import matrices

import sparsecomp
from sparsecomp.formats import SparseTensor
from sparsecomp.formats.choice import candidates, choose, device_of, load_coefficients
from sparsecomp.formats.programs import program
from sparsecomp.formats.stats import matrix_stats
from sparsecomp.tools.calibrate import best_time

RUNS = (("spmm", 32), ("spmm", 128), ("spmv", 1), ("sddmm", 32))
#: The GPU's cases, smaller: every access of every emulated thread is a Python callback.
GPU_RUNS = (("spmm", 16), ("spmv", 1), ("sddmm", 16))


def blocks8(n: int, seed: int = 5) -> sp.csr_matrix:
    """``n x n`` with 8x8 blocks 70% full over 2% of the block grid."""
    rng = np.random.default_rng(seed)
    grid = n // 8
    at = np.unique(rng.integers(0, grid * grid, int(0.02 * grid * grid)))
    b, r, c = np.nonzero(rng.random((at.size, 8, 8)) < 0.7)
    m = sp.csr_matrix(
        (rng.standard_normal(b.size), ((at[b] // grid) * 8 + r, (at[b] % grid) * 8 + c)),
        shape=(n, n),
    )
    return matrices.canonical(m)


def circuit(n: int, seed: int = 6) -> sp.csr_matrix:
    """A diagonal, 1-4 random entries per row and 20 rows and columns holding 1/10 of n each."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5, n)
    rows = np.concatenate([np.arange(n), np.repeat(np.arange(n), lengths)])
    cols = np.concatenate([np.arange(n), rng.integers(0, n, lengths.sum())])
    hubs = rng.choice(n, 20, replace=False)
    spread = rng.integers(0, n, (20, n // 10))
    rows = np.concatenate([rows, np.repeat(hubs, n // 10), spread.ravel()])
    cols = np.concatenate([cols, spread.ravel(), np.repeat(hubs, n // 10)])
    return matrices.canonical(sp.csr_matrix((rng.standard_normal(rows.size), (rows, cols)), (n, n)))


def suite(quick: bool) -> list[matrices.Spec]:
    n = 1024 if quick else 16384
    extra = [
        matrices.Spec("blocks8", f"{n}^2, 8x8 blocks 70% full", lambda: blocks8(n)),
        matrices.Spec("circuit", f"{4 * n}^2 circuit-like", lambda: circuit(4 * n)),
    ]
    return matrices.suite(quick=quick) + extra


class Sweep:
    """Kernels by (op, layout), compiled once for ``target``; on ``cuda-emu`` a case's time is
    the profiler's H100 roofline estimate (``Profile.h100_seconds``), not the wall time."""

    def __init__(self, target: str = "host") -> None:
        self.target = target
        self.kernels: dict[tuple[str, str], Any] = {}
        #: the GPU's BSR blocks run on tensor cores in tf32 (10 bits of mantissa)
        self.tolerance = 2e-2 if target.startswith("cuda") else 2e-3

    def kernel(self, op: str, layout: str) -> Any:
        if (op, layout) not in self.kernels:
            emulated = self.target.startswith("cuda-emu:")
            self.kernels[op, layout] = sparsecomp.compile(
                program(op, layout), self.target, profile=emulated
            )
        return self.kernels[op, layout]

    def choice(self, a: sp.csr_matrix, op: str, k: int) -> Any:
        """What ``exe.prepare`` chooses for ``a`` (the model's best few timed on a sample),
        its variants readied by a first prepare so that the decision time is the choice's."""
        exe = self.kernel(op, "csr")
        exe.prepare(a, k=k)
        return exe.prepare(a, k=k).choice

    def _measure(self, exe: Any, args: tuple[Any, ...], reps: int) -> tuple[Any, float]:
        """The call's result and its time."""
        if self.target.startswith("cuda-emu:"):
            profile = exe.profile(*args)
            return profile.result, float(profile.h100_seconds)
        return exe(*args), best_time(lambda: exe(*args), reps)

    def time(self, a: sp.csr_matrix, op: str, k: int, layout: str, reps: int) -> float:
        exe = self.kernel(op, layout)
        packed = a.toarray() if layout == "dense" else SparseTensor.from_scipy(a, layout)
        rng = np.random.default_rng(0)
        m, n = a.shape
        if op in ("spmm", "spmv"):
            shape = (n, k) if op == "spmm" else (n,)
            b = rng.standard_normal(shape).astype(np.float32)
            got, seconds = self._measure(exe, (packed, b), reps)
            # float32 sums in another order: the error is relative to sum |a_ij b_j|
            bound = self.tolerance * (1 + abs(a) @ np.abs(b))
            worst = float(np.max(np.abs(got - a @ b) - bound, initial=-1.0))
            assert worst <= 0, f"{op} over {layout}: off by {worst} beyond the bound"
            return seconds
        xs = rng.standard_normal((m, k)).astype(np.float32)
        ys = rng.standard_normal((n, k)).astype(np.float32)
        result, seconds = self._measure(exe, (packed, xs, ys), reps)
        got = result.to_scipy().tocsr()
        coo = a.tocoo()
        sampled = coo.data * np.einsum("ij,ij->i", xs[coo.row], ys[coo.col])
        want = sp.csr_matrix((sampled, (coo.row, coo.col)), shape=a.shape)
        error = abs(got - want).max() if want.nnz else 0.0
        assert error <= self.tolerance * (1 + abs(want).max()), f"sddmm over {layout}: {error}"
        return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the small matrices")
    parser.add_argument("--reps", type=int, default=5, help="timed calls per case (best)")
    parser.add_argument("--matrices", help="comma-separated subset")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument(
        "--target",
        default="host",
        help="host (default) or cuda-emu:sm_80: the GPU's choice, judged by the emulator's "
        "H100 roofline estimates (use with --quick: every access is emulated)",
    )
    parser.add_argument(
        "--times",
        help="JSON file of measured times: read where it has a case, written with the new "
        "ones (to judge another cost model on the same measurements)",
    )
    args = parser.parse_args(argv)
    known: dict[str, float] = {}
    if args.times and Path(args.times).is_file():
        known = json.loads(Path(args.times).read_text())
    specs = suite(args.quick)
    if args.matrices:
        wanted = args.matrices.split(",")
        unknown = sorted(set(wanted) - {s.name for s in specs})
        if unknown:
            parser.error(
                f"unknown matrices {', '.join(unknown)}; the suite has "
                + ", ".join(s.name for s in specs)
            )
        specs = [s for s in specs if s.name in wanted]
    device = device_of(args.target)
    runs = GPU_RUNS if device == "cuda" else RUNS
    _, source = load_coefficients(device)
    print(f"cost model: {source}", file=sys.stderr)
    sweep = Sweep(args.target)
    header = ("| matrix | op | CSR ms | best | best ms | model | choice | choice ms "
              "| decision ms | choice / best | CSR / choice |")  # fmt: skip
    lines = [header, "|" + " --- |" * 11]
    ratios, vs_csr, decisions = [], [], []
    for spec in specs:
        a = spec.build()
        stats = matrix_stats(a)
        # Compile first: a build's tail keeps a core busy for a while, and our two
        # threads then wait for it.
        # the matrix as built (its quick and full forms share a name) on this target:
        # a file of times from another size or device is not reused for this one
        case = f"{spec.name}@{a.shape[0]}x{a.shape[1]}:{a.nnz}/{args.target}"
        for op, _ in runs:
            for layout in candidates(stats, op, device):
                if any(f"{case}/{op}/{k}/{layout}" not in known for _, k in runs):
                    sweep.kernel(op, layout)
        for op, k in runs:
            times = {}
            for layout in candidates(stats, op, device):
                key = f"{case}/{op}/{k}/{layout}"
                if key not in known:
                    known[key] = sweep.time(a, op, k, layout, args.reps)
                times[layout] = known[key]
            if args.times:
                Path(args.times).write_text(json.dumps(known, indent=0))
            model = choose(a, op=op, k=k, target=args.target)
            choice = sweep.choice(a, op, k) if device == "host" else model
            best = min(times, key=times.__getitem__)
            chosen = times[choice.layout]
            ratios.append(chosen / times[best])
            vs_csr.append(times["csr"] / chosen)
            decisions.append(choice.seconds)
            name = f"spmm K={k}" if op == "spmm" else op if op == "spmv" else f"sddmm K={k}"
            line = (f"| {spec.name} | {name} | {times['csr'] * 1e3:.4g} | {best} | "
                    f"{times[best] * 1e3:.4g} | {model.layout} | {choice.layout} | "
                    f"{chosen * 1e3:.4g} | "
                    f"{choice.seconds * 1e3:.1f} | {ratios[-1]:.2f} | "
                    f"{vs_csr[-1]:.2f} |")  # fmt: skip
            lines.append(line)
            print(line, flush=True)
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    summary = [
        "",
        f"geomean choice / best {geomean:.3f} (target <= 1.10); worst CSR / choice "
        f"{min(vs_csr):.2f} (target >= 0.90); slowest decision {max(decisions) * 1e3:.1f} ms",
    ]
    summary.append(_decision_at_scale(sweep if device == "host" else None))
    print("\n".join(summary))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines + summary) + "\n")
    return 0


def _decision_at_scale(sweep: Sweep | None) -> str:
    """Decision times on three 10M-nonzero matrices for SpMM at K = 64: ``exe.prepare``'s
    (statistics, model, timing a sample) on the host, else the model's."""
    import formats

    rng = np.random.default_rng(0)
    found = []
    for build in (formats.uniform, formats.powerlaw, formats.blocks):
        a = build(10_000_000, rng)
        choice = sweep.choice(a, "spmm", 64) if sweep else choose(a, op="spmm", k=64)
        found.append(f"{build.__name__} {choice.seconds * 1e3:.0f} ms ({choice.layout})")
    return "decision at 10M nonzeros (target < 100 ms): " + ", ".join(found)


if __name__ == "__main__":
    raise SystemExit(main())
