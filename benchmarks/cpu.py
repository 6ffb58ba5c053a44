"""SpMV, SpMM, SDDMM and SpGEMM on the CPU: sparsecomp beside its peers, in one run.

Run: ``.venv/bin/python benchmarks/cpu.py [--scale 16] [--rounds 3] [--repeat 3]
[--markdown docs/benchmarks-cpu.md]``; ``--quick`` uses tiny matrices (the
smoke test). The peers need ``pip install -e '.[bench]'`` for torch.

Operations (float32, CSR with int32 indices):

* SpMV ``y = A x``;
* SpMM ``C = A B`` with K = 32 and 128 (B, C dense row-major);
* SDDMM ``out = S .* (X Y^T)`` at S's stored entries, X: M x K, Y: N x K
  (``--sddmm-k``, 32), the output a vector of values aligned with ``S.data``;
* SpGEMM ``C = A A`` of the (square) matrix with itself, C in CSR; on the
  matrices where it takes at most ``SPGEMM_WORK`` multiply-adds (else n/a).
  Results are compared with scipy's as sparse matrices, the same way. Some
  peers order each row's columns (``ORDERED``: sparsecomp's kernel,
  ``mkl-opt-sorted``; checked), the others leave them as found (scipy,
  ``mkl-opt``, ``sparsecomp-unsorted``): compare like with like
  (``--baseline sparsecomp-unsorted`` for the unordered ones).

Matrices: :mod:`matrices` (its docstring has the sizes). Peers: :mod:`peers`
(sparsecomp in its program forms, scipy, dense numpy, torch CPU, Intel oneMKL,
the upstream MLIR sparsifier);
each one's "how" is printed under the tables.

Method: each peer's ``prepare`` (packing, compiling) is untimed. The first
result of every peer is checked against scipy's: ``|got - ref| <= 1e-4 *
bound + tiny`` elementwise, where ``bound`` is the same operation on the
absolute values of the operands (the scale of the rounding error of float32
sums) and ``tiny`` float32's smallest normal number (results in the denormal
range differ with flush-to-zero, as on bayer10's tiny values); a
failing peer is shown as WRONG and not timed. Timing (``time.perf_counter``)
goes in ``--rounds`` rounds over the peers, their order rotated each round;
in its turn a peer sleeps ``--pause`` seconds (so that the previous peer's
OpenMP/BLAS threads have stopped spinning), warms up once and makes
``--repeat`` timed calls, more while its turn has lasted less than
``--min-time`` seconds (at most ``MAX_CALLS``; sub-millisecond kernels
otherwise get only a handful of samples, and on a shared machine most of
them land in someone else's time slice). The table shows the best call (``--stat median``:
the median) in ms, and for every peer its time divided by the baseline's
(``--baseline``, sparsecomp): above 1, the baseline is faster. Geomean rows
multiply over the matrices where both ran. For SpMV the bandwidth bound is
the bytes an SpMV must move (see :mod:`bandwidth`) over the measured read
bandwidth. The machine is shared and noisy: read ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import bandwidth
import matrices
import numpy as np
import scipy.sparse as sp
from peers import OPS, Aborted, Case, Peer, Run, Unavailable, scipy_peer
from peers.dense import DensePeer
from peers.mkl_peer import MklPeer
from peers.sparsecomp_peer import SparsecompPeer
from peers.torch_cpu import TorchPeer
from peers.upstream import VARIANTS, UpstreamPeer
from report import Cell, Row, form_table, summary, table

RTOL = 1e-4
#: SpGEMM runs where A @ A takes at most this many multiply-adds (scipy: about 1 s;
#: the 27-point FEM matrix and the band need 80 and 75 million)
SPGEMM_WORK = 100_000_000
FLOOR = float(np.finfo(np.float32).tiny)  # absolute slack: float32's smallest normal
MAX_CALLS = 200  # timed calls per turn at most (--min-time)
#: our program form called with the scipy matrix (the upstream form's operand)
SCIPY_FORM = "sparsecomp-scipy"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--scale", type=int, default=16, choices=(16, 17, 18), help="R-MAT 2^scale")
    parser.add_argument("--quick", action="store_true", help="tiny matrices (smoke test)")
    parser.add_argument(
        "--repeat", type=int, default=None, help="timed calls per round (3; quick: 2)"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="rounds over all peers (3; quick: 1)"
    )
    parser.add_argument(
        "--min-time",
        type=float,
        default=None,
        help="seconds of timed calls per turn at least, past --repeat (0.05; quick: 0)",
    )
    parser.add_argument("--stat", choices=("best", "median"), default="best")
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of ops")
    parser.add_argument("--matrices", default="", help="comma-separated subset of matrices")
    parser.add_argument("--spmm-k", default="32,128")
    parser.add_argument("--sddmm-k", type=int, default=32)
    parser.add_argument("--baseline", default="sparsecomp", help="peer the ratios divide by")
    parser.add_argument(
        "--upstream",
        default="best",
        help="upstream variants to run: comma-separated names, 'best' (the fastest per op) "
        f"or 'all' (best and {', '.join(VARIANTS)})",
    )
    parser.add_argument("--peers", default="", help="comma-separated subset of peers to run")
    parser.add_argument(
        "--pause",
        type=float,
        default=None,
        help="seconds of sleep before each peer's timing (0.3; quick: 0), so that the "
        "previous peer's spinning OpenMP/BLAS threads have gone to sleep",
    )
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    _validate(parser, args)
    args.command = " ".join(sys.argv[1:] if argv is None else argv)
    if args.repeat is None:
        args.repeat = 2 if args.quick else 3
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.pause is None:
        args.pause = 0.0 if args.quick else 0.3
    if args.min_time is None:
        args.min_time = 0.0 if args.quick else 0.05
    return args


def _validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse unknown names and an output folder that is not there before the run (a
    typo in --ops ran every matrix, then ended in a KeyError)."""

    def known(option: str, given: str, names: list[str]) -> None:
        unknown = sorted({n for n in given.split(",") if n} - set(names))
        if unknown:
            parser.error(f"{option}: unknown {', '.join(unknown)}; known: {', '.join(names)}")

    known("--ops", args.ops, list(OPS))
    known("--peers", args.peers, [*PEERS, "upstream"])
    if args.upstream != "all":
        known("--upstream", args.upstream, ["best", *VARIANTS])
    known("--matrices", args.matrices, [m.name for m in matrices.suite(args.scale, args.quick)])
    if args.markdown is not None and not args.markdown.resolve().parent.is_dir():
        parser.error(f"--markdown: no folder {args.markdown.resolve().parent}")


#: The peers --peers names (besides "upstream", whose variants --upstream names).
PEERS = (
    "sparsecomp", "sparsecomp-scipy", "sparsecomp-up", "sparsecomp-up-out",
    "sparsecomp-prepared", "sparsecomp-unsorted", "scipy", "dense", "torch", "mkl",
    "mkl-opt", "mkl-opt-sorted",
)  # fmt: skip


def make_peers(args: argparse.Namespace) -> list[Peer]:
    wanted = {p for p in args.peers.split(",") if p}
    factories: list[tuple[str, Callable[[], Peer]]] = [
        ("sparsecomp", SparsecompPeer),
        ("sparsecomp-scipy", partial(SparsecompPeer, form="scipy")),
        ("sparsecomp-up", partial(SparsecompPeer, form="upstream")),
        ("sparsecomp-up-out", partial(SparsecompPeer, form="upstream-out")),
        ("sparsecomp-prepared", partial(SparsecompPeer, form="prepared")),
        ("sparsecomp-unsorted", partial(SparsecompPeer, form="unsorted")),
        ("scipy", scipy_peer.ScipyPeer),
        ("dense", DensePeer),
        ("torch", TorchPeer),
        ("mkl", partial(MklPeer, optimized=False)),
        ("mkl-opt", partial(MklPeer, optimized=True)),
        ("mkl-opt-sorted", partial(MklPeer, optimized=True, ordered=True)),
    ]
    variants = ["best", *VARIANTS] if args.upstream == "all" else args.upstream.split(",")
    factories += [("upstream", partial(UpstreamPeer, v)) for v in variants if v]
    assert {name for name, _ in factories} == {*PEERS, "upstream"}
    return [make() for name, make in factories if not wanted or name in wanted]


def cases(op: str, a: sp.csr_matrix, name: str, args: argparse.Namespace) -> list[Case]:
    """The cases of ``op`` on ``a``, with seeded standard-normal dense operands."""
    m, n = a.shape
    rng = np.random.default_rng(7)
    if op == "spmv":
        return [Case(op, name, a, (rng.standard_normal(n, dtype=np.float32),))]
    if op == "spmm":
        ks = [int(k) for k in args.spmm_k.split(",")]
        return [Case(op, name, a, (rng.standard_normal((n, k), dtype=np.float32),)) for k in ks]
    if op == "spgemm":
        work = spgemm_work(a)
        if m != n or work > SPGEMM_WORK:
            why = f"A @ A takes {work:.2g} multiply-adds, more than the {SPGEMM_WORK:.0g} run"
            return [Case(op, name, a, (), skip=why if m == n else "not square")]
        return [Case(op, name, a, ())]
    k = args.sddmm_k
    x = rng.standard_normal((m, k), dtype=np.float32)
    y = rng.standard_normal((n, k), dtype=np.float32)
    return [Case(op, name, a, (x, y))]


def spgemm_work(a: sp.csr_matrix) -> int:
    """Multiply-adds of ``A @ A``: column counts times row lengths."""
    cols = np.bincount(a.indices, minlength=a.shape[1]).astype(np.int64)
    rows = np.diff(a.indptr).astype(np.int64)
    return int(cols[: rows.shape[0]] @ rows[: cols.shape[0]])


#: peers whose SpGEMM result has each row's columns in order (checked)
ORDERED = ("sparsecomp", "sparsecomp-up", "mkl-opt-sorted")


def as_csr(result: object) -> sp.csr_matrix:
    """A peer's SpGEMM result (scipy, ``SparseTensor``, torch CSR) as scipy CSR."""
    if sp.issparse(result):
        return sp.csr_matrix(result)
    if hasattr(result, "to_scipy"):
        return sp.csr_matrix(result.to_scipy())
    if hasattr(result, "crow_indices"):
        parts = (result.values(), result.col_indices(), result.crow_indices())  # type: ignore[attr-defined]
        return sp.csr_matrix(tuple(p.numpy() for p in parts), shape=tuple(result.shape))  # type: ignore[attr-defined]
    raise TypeError(f"not a sparse result: {type(result).__name__}")


def abs_case(case: Case) -> Case:
    return Case(case.op, case.matrix, abs(case.a), tuple(np.abs(d) for d in case.dense))


def check(peer: Peer, case: Case, ref: Any, bound: Any) -> Run | Cell:
    """Prepare ``peer`` and check its result against ``ref``: the run, or why not."""
    try:
        run = peer.prepare(case)
        if sp.issparse(ref):
            got = as_csr(run())
            if peer.name in ORDERED and not got.has_sorted_indices:
                return Cell(status="WRONG", reason="a row's columns are not in order")
            return check_sparse(run, got, ref, bound)
        got = np.asarray(run())
    except Unavailable as err:
        return Cell(status="n/a", reason=str(err))
    except Aborted as err:
        return Cell(status="ABORTED", reason=str(err))
    except Exception as err:  # a peer's own error: report it, keep going
        return Cell(status="n/a", reason=f"{type(err).__name__}: {str(err)[:160]}")
    if got.shape != ref.shape:
        return Cell(status="WRONG", reason=f"shape {got.shape}, expected {ref.shape}")
    err = np.abs(got.astype(np.float64) - ref)
    # FLOOR: below float32's normal range, results differ by flushing or keeping denormals
    if not np.all(err <= RTOL * bound + FLOOR):  # also false for NaN
        worst = float(np.nanmax(err / np.maximum(bound, 1e-30))) if err.size else 0.0
        return Cell(status="WRONG", reason=f"error up to {worst:.2e} x bound (allowed {RTOL:g})")
    return run


def check_sparse(run: Run, got: sp.csr_matrix, ref: Any, bound: Any) -> Run | Cell:
    """``check`` of a sparse result: the same elementwise rule, on sparse matrices."""
    if got.shape != ref.shape:
        return Cell(status="WRONG", reason=f"shape {got.shape}, expected {ref.shape}")
    err = abs(got.astype(np.float64) - ref)
    excess = err - RTOL * bound
    worst = float(excess.max()) if excess.nnz else 0.0
    if not worst <= FLOOR:  # also true for NaN
        return Cell(status="WRONG", reason=f"error above {RTOL:g} x bound by {worst:.2e}")
    return run


def time_peers(runs: dict[str, Run], args: argparse.Namespace) -> dict[str, Cell]:
    """``--rounds`` rounds; in each, every peer in turn (order rotated) sleeps
    ``--pause``, warms up once and makes ``--repeat`` timed calls (more, up to
    ``MAX_CALLS``, until the turn's calls took ``--min-time`` seconds). A burst
    of load from outside then hits every peer alike, and the best (or median)
    of all calls is kept."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    if not names:  # every peer failed its check: nothing to time
        return {}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = runs[name]
            time.sleep(args.pause)
            run()  # warm-up
            spent, calls = 0.0, 0
            while calls < args.repeat or (spent < args.min_time and calls < MAX_CALLS):
                start = time.perf_counter()
                run()
                took = time.perf_counter() - start
                times[name].append(took)
                spent, calls = spent + took, calls + 1
    pick = min if args.stat == "best" else statistics.median
    return {name: Cell(pick(ts)) for name, ts in times.items()}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ops = [op for op in args.ops.split(",") if op]
    if args.quick:
        # No pauses in the smoke test: keep the OpenMP runtimes loaded later (libomp for
        # sparsecomp and upstream, torch's libgomp) from spinning into each other's turns.
        os.environ.setdefault("KMP_BLOCKTIME", "0")
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    cache = tempfile.mkdtemp(prefix="sparsecomp-bench-cache-")
    os.environ["SPARSECOMP_CACHE_DIR"] = cache  # so that the first compile is cold
    try:
        return _run(args, ops)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _run(args: argparse.Namespace, ops: list[str]) -> int:
    peers = make_peers(args)
    try:
        return _compare(args, ops, peers)
    finally:
        for peer in peers:
            peer.close()


def _compare(args: argparse.Namespace, ops: list[str], peers: list[Peer]) -> int:
    names = [p.name for p in peers]
    if args.baseline not in names:
        raise SystemExit(f"--baseline {args.baseline} is not one of {names}")
    bw = None
    if "spmv" in ops:
        log("# measuring read bandwidth")
        bw = bandwidth.measure((64 if args.quick else 512) << 20, 3 if args.quick else 5)
    specs = matrices.suite(args.scale, args.quick)
    wanted = [m for m in args.matrices.split(",") if m]
    specs = [s for s in specs if not wanted or s.name in wanted]
    rows: dict[str, list[Row]] = {}
    about: dict[str, str] = {}
    for spec in specs:
        start = time.perf_counter()
        a = spec.build()
        about[spec.name] = f"{spec.about}: {a.shape[0]} x {a.shape[1]}, {a.nnz} nonzeros"
        log(f"# {spec.name}: {a.shape}, nnz {a.nnz} ({time.perf_counter() - start:.1f} s)")
        for op in ops:
            for case in cases(op, a, spec.name, args):
                row = Row(spec.name, a.shape[0], a.nnz)
                if case.skip is not None:
                    row.cells = {name: Cell(status="n/a", reason=case.skip) for name in names}
                    rows.setdefault(case.label, []).append(row)
                    continue
                ref = scipy_peer.compute(case).astype(np.float64)
                bound = scipy_peer.compute(abs_case(case)).astype(np.float64)
                if op == "spmv" and bw is not None:
                    row.bound = bandwidth.spmv_bytes(a) / bw.read
                runs: dict[str, Run] = {}
                for peer in peers:
                    checked = check(peer, case, ref, bound)
                    if isinstance(checked, Cell):
                        row.cells[peer.name] = checked
                    else:
                        runs[peer.name] = checked
                row.cells.update(time_peers(runs, args))
                del runs
                for name in names:
                    cell = row.cells[name]
                    log(f"  {case.label:<12} {name:<20} {cell.text():>10} {cell.reason}")
                rows.setdefault(case.label, []).append(row)
    calls = (
        call_overhead(args)
        if "spmm" in ops and any(n.startswith("sparsecomp") for n in names)
        else None
    )
    text = render(args, peers, rows, about, bw, calls)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


TITLES = {
    "spmv": "SpMV y = A x",
    "spmm": "SpMM C = A B",
    "sddmm": "SDDMM S .* (X Y^T)",
    "spgemm": "SpGEMM C = A A",
}


def render(
    args: argparse.Namespace,
    peers: list[Peer],
    rows: dict[str, list[Row]],
    about: dict[str, str],
    bw: bandwidth.Bandwidth | None,
    overhead: dict[str, float] | None = None,
) -> str:
    """The whole report as markdown."""
    names = [p.name for p in peers]
    stat = "best" if args.stat == "best" else "median"
    out = [
        "# CPU benchmark: SpMV, SpMM, SDDMM, SpGEMM",
        "",
        f"`benchmarks/cpu.py {args.command}` on {platform.machine()}, {os.cpu_count()} cores"
        f" ({_cpu_name()}); {stat} of {args.rounds} rounds x at least {args.repeat} calls"
        f" ({args.min_time} s of calls per turn at least; rounds over the"
        f" peers, each turn {args.pause} s of sleep and a warm-up call first), in ms;"
        f" `P ratio` = P's time / {args.baseline}'s (above 1: {args.baseline} is faster).",
        "",
    ]
    if bw is not None:
        out += [f"Read bandwidth: {bw.describe()}.", ""]
    for label, table_rows in rows.items():
        op, _, k = label.partition(" ")
        title = f"{TITLES[op]}, {k}" if k else TITLES[op]
        out.append(table(title, table_rows, names, args.baseline))
    forms = [n for n in ("sparsecomp", "sparsecomp-up", "sparsecomp-prepared") if n in names]
    if forms:
        out += [
            "## Summary",
            "",
            "Geomean over the matrices of each peer's time over each "
            "program form's (worst case in parentheses; above 1: the form is faster); "
            "`form / sparsecomp` is the form's time over sparsecomp's (above 1: slower; "
            "the worst case is the largest).",
            "",
        ]
        out += [*summary(rows, forms, [n for n in names if n != SCIPY_FORM]), ""]
    if {"sparsecomp", SCIPY_FORM, "sparsecomp-up"} <= set(names):
        out += [
            "## Program form and operand",
            "",
            "What the upstream program form costs, both forms called with the scipy"
            f" matrix (`sparsecomp-up / {SCIPY_FORM}`); what the scipy matrix costs our"
            " form against a packed `SparseTensor` (the check of the caller's index"
            f" arrays at every call: `{SCIPY_FORM} / sparsecomp`); and both (`sparsecomp-up"
            " / sparsecomp`). Geomean over the matrices, the worst (largest) in parentheses.",
            "",
            *form_table(rows, "sparsecomp", SCIPY_FORM, "sparsecomp-up"),
            "",
        ]
    if overhead:
        out += overhead_table(overhead)
    out += compile_table(peers)
    out += ["## Peers", ""] + [f"- {p.name}: {p.about}" for p in peers] + [""]
    out += ["## Matrices", ""] + [f"- {k}: {v}" for k, v in about.items()]
    return "\n".join(out) + "\n"


OVERHEAD_CALLS = 1000


def call_overhead(args: argparse.Namespace) -> dict[str, float]:
    """Median seconds of one call of a 10x10 SpMM (K=4, 30% dense) over ``OVERHEAD_CALLS``
    calls: sparsecomp's two forms with a ``SparseTensor`` or the scipy matrix, and scipy."""
    import sparsecomp
    from sparsecomp.formats import SparseTensor

    log("# call overhead: 10x10 SpMM")
    kernels = Path(__file__).resolve().parent / "kernels"
    ours = sparsecomp.compile(kernels / "spmm.mlir")
    up = sparsecomp.compile(kernels / "upstream_form" / "spmm.mlir")
    a = matrices.canonical(sp.random(10, 10, density=0.3, random_state=3))
    b = np.random.default_rng(3).standard_normal((10, 4), dtype=np.float32)
    c, d = np.zeros((10, 4), np.float32), np.empty((10, 4), np.float32)
    t = SparseTensor.from_scipy(a, "csr")
    calls: dict[str, Callable[[], object]] = {
        "sparsecomp, SparseTensor": lambda: ours(t, b),
        "sparsecomp, scipy matrix": lambda: ours(a, b),
        "sparsecomp-up, scipy matrix": lambda: up(a, b, c),
        "sparsecomp-up, scipy matrix, out=D": lambda: up(a, b, c, out=d),
        "scipy (a @ b)": lambda: a @ b,
    }
    out = {}
    for name, call in calls.items():
        np.testing.assert_allclose(np.asarray(call()), a @ b, rtol=1e-5, atol=1e-6)
        time.sleep(getattr(args, "pause", 0.0))  # other peers' spinning threads go to sleep
        for _ in range(100):  # warm up
            call()
        times = []
        for _ in range(OVERHEAD_CALLS):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        out[name] = statistics.median(times)
    return out


def overhead_table(overhead: dict[str, float]) -> list[str]:
    scipy_time = overhead.get("scipy (a @ b)")
    out = [
        "## Call overhead",
        "",
        f"A 10x10 SpMM (K=4, 30% dense), median of {OVERHEAD_CALLS} calls in a row.",
        "",
        "| call | us | / scipy |",
        "| --- | ---: | ---: |",
    ]
    for name, seconds in overhead.items():
        rel = f"{seconds / scipy_time:.2f}" if scipy_time else "-"
        out.append(f"| {name} | {seconds * 1e6:.1f} | {rel} |")
    return [*out, ""]


def compile_table(peers: list[Peer]) -> list[str]:
    """Compile seconds: per kernel, or mean (max) over a peer's per-shape kernels."""
    out = ["## Compile times", "", "| peer | kernel | cold s | cached s |"]
    out.append("| --- | --- | ---: | ---: |")
    for p in peers:
        by_op: dict[str, list[tuple[str, float, float | None]]] = {}
        for key, (cold, cached) in p.compile_times.items():
            by_op.setdefault(key.split()[0], []).append((key, cold, cached))
        for op, entries in by_op.items():
            if len(entries) == 1:
                key, cold, cached = entries[0]
                again = "-" if cached is None else f"{cached:.3f}"
                out.append(f"| {p.name} | {key} | {cold:.3f} | {again} |")
                continue
            colds = [c for _, c, _ in entries]
            out.append(
                f"| {p.name} | {op}: {len(entries)} kernels, one per shape; mean (max) "
                f"| {statistics.mean(colds):.3f} ({max(colds):.3f}) | - |"
            )
    if len(out) == 4:
        out.append("| - | nothing was compiled | - | - |")
    return [*out, ""]


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
