"""sparsecomp.dask on this machine: SpMM, SpMV and PageRank on 1 and 2 workers.

A power-law matrix (rows' lengths drawn from a Pareto law, ``--nnz`` stored
entries, f32, 25 per row on average) is written as row-block ``.npz`` files,
cut by :func:`sparsecomp.dask.balanced` at row boundaries, and read by the
workers (:func:`sparsecomp.dask.from_files`). Two clusters run side by side,
of 1 and of 2 workers of one thread each (``distributed.LocalCluster``, worker
processes; the kernels compiled for one thread). The benchmark times (best of
``--reps`` after a warm-up that ships the executable and packs the
partitions; the clusters take turns within each round, so that a slow spell
of this shared machine falls on both):

* SpMM with ``--k`` dense columns (``B`` persisted on the cluster, the result
  left there), and SpMV (its vector shipped with the call);
* a PageRank iteration (an SpMV whose vector goes out and comes back);

and reports, from Dask's own counters and task stream:

* the bytes workers sent each other per PageRank iteration, checked against
  what the partitioning implies (the vector to every worker but the one
  that made it, the result's chunks to the worker that puts them together,
  and the result to the client), not the matrix;
* the time to build a call's graph here, and the scheduler's overhead per
  task: the wall time from submitting the graph to the results being in
  place, less the kernel time its busiest worker spent, per task on that
  worker, and as a share of one partition's kernel time.

From the 1-worker figures (SpMV's kernel time per nonzero, the scheduler's
overhead per task, the graph's time per partition) it prints the model of
docs/dask.md for a PageRank iteration on 1B edges at 1, 16 and 128 workers,
and ``--plot`` draws both. It exits with status 1 where the bytes sent per
PageRank iteration exceed what the partitioning implies by more than a quarter.

    .venv/bin/python benchmarks/dask_cluster.py                  # 51M nonzeros (about 3 minutes)
    .venv/bin/python benchmarks/dask_cluster.py --plot docs/figures/dask_scaling.png
    .venv/bin/python benchmarks/dask_cluster.py --quick          # 2M nonzeros (seconds)
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

import sparsecomp
import sparsecomp.dask as sd
from sparsecomp.targets.cpu import detect_host

REPO = Path(__file__).resolve().parents[1]


def power_law(nnz: int, seed: int = 0) -> sp.csr_matrix:
    """A square f32 matrix of about ``nnz`` entries, rows' lengths Pareto-distributed."""
    rng = np.random.default_rng(seed)
    n = max(1, nnz // 25)
    lengths = np.minimum((rng.pareto(1.5, n) + 1) * 8, n // 2 + 1).astype(np.int64)
    lengths = np.maximum(1, (lengths * (nnz / lengths.sum())).astype(np.int64))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = rng.integers(0, n, int(indptr[-1]), dtype=np.int32)
    data = rng.random(int(indptr[-1]), dtype=np.float32)
    A = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    A.sort_indices()
    A.sum_duplicates()
    return A


def write_parts(A: sp.csr_matrix, parts: int, folder: Path) -> list[str]:
    """Row-block ``.npz`` files balanced by nonzeros (cut at row boundaries)."""
    paths = []
    for k, p in enumerate(sd.balanced(A.indptr, parts, slack=1.0)):
        path = folder / f"part{k:03d}.npz"
        sp.save_npz(path, A[p.row_start : p.row_stop], compressed=False)
        paths.append(str(path))
    return paths


def kernel_time(stream: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds each worker spent computing ``call`` tasks in a task stream."""
    busy: dict[str, float] = {}
    for t in stream:
        key = t["key"] if isinstance(t["key"], str) else t["key"][0]
        if "call" not in key:  # (Dask fuses a call with the task that puts its chunk in place)
            continue
        for s in t["startstops"]:
            if s["action"] == "compute":
                busy[t["worker"]] = busy.get(t["worker"], 0.0) + s["stop"] - s["start"]
    return busy


def sent(client: Any) -> int:
    """Bytes all workers have sent to other workers (and to the client) so far."""
    return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())


def spilled(client: Any) -> int:
    """Bytes the workers hold on disk now (Dask's spill, past their memory limit)."""

    def on_disk(dask_worker: Any) -> int:
        data = dask_worker.data
        return int(data.spilled_total.disk) if hasattr(data, "spilled_total") else 0

    return sum(client.run(on_disk).values())


class Cluster:
    """A ``LocalCluster`` of ``workers`` one-thread worker processes holding the
    matrix (read from ``paths``) and the operands, warmed up: the first call of
    each kernel ships the executable, packs the partitions and moves ``B``.
    :meth:`rep` times one call; the clusters of a run take turns (see
    :func:`main`)."""

    def __init__(
        self, workers: int, paths: list[str], n: int, k: int, exe: Any, memory_limit: str | None
    ) -> None:
        import dask.array as da
        import distributed

        self.workers, self.exe, self.n = workers, exe, n
        self.cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
            memory_limit=memory_limit or "auto",
        )  # fmt: skip
        self.client = distributed.Client(self.cluster)
        self.D = sd.from_files(paths, client=self.client)
        rng = np.random.default_rng(1)
        B = rng.random((n, k), dtype=np.float32)
        # B lives on the cluster, as it would between the steps of an algorithm
        self.operands = {
            "spmm": self.client.persist(da.from_array(B, chunks=B.shape)),
            "spmv": rng.random(n, dtype=np.float32),
        }
        distributed.wait(self.operands["spmm"])
        self.times: dict[str, list[float]] = {"spmm": [], "spmv": []}
        self.overheads: dict[str, list[float]] = {"spmm": [], "spmv": []}
        self.builds: dict[str, list[float]] = {"spmm": [], "spmv": []}
        self.tasks: dict[str, float] = {}
        for name, operand in self.operands.items():
            distributed.wait(self.client.persist(sd.map(exe, name, self.D, operand)))

    def rep(self, name: str) -> None:
        """One timed call of ``name`` (its results left on the workers)."""
        import distributed

        with distributed.get_task_stream(self.client) as stream:
            start = time.time()
            graph = sd.map(self.exe, name, self.D, self.operands[name])  # the graph, built here
            built = time.time()
            distributed.wait(self.client.persist(graph))  # results stay on the workers
            done = time.time()
        busy = kernel_time(stream.data)
        per_worker_tasks = self.D.npartitions / self.workers
        self.overheads[name].append((done - built - max(busy.values())) / per_worker_tasks)
        self.builds[name].append(built - start)
        self.times[name].append(done - start)
        self.tasks[name] = max(busy.values()) / per_worker_tasks

    def pagerank(self, iterations: int = 5) -> dict[str, float]:
        """Seconds and bytes sent per PageRank iteration (the vector shipped each time)."""
        n = self.n
        r = np.full(n, 1 / n, np.float32)
        before, start = sent(self.client), time.time()
        for _ in range(iterations):
            call = sd.map(self.exe, "spmv", self.D, r)
            r = 0.85 * self.client.compute(call).result() + 0.15 / n  # this cluster's client
        return {
            "pagerank": (time.time() - start) / iterations,
            "pagerank_bytes": (sent(self.client) - before) / iterations,
        }

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workers": self.workers, **self.pagerank()}
        for name in self.times:
            out[name] = min(self.times[name])
            out[f"{name}_overhead"] = statistics.median(self.overheads[name])
            out[f"{name}_build"] = statistics.median(self.builds[name])
            out[f"{name}_task"] = self.tasks[name]
        out["matrix_bytes"] = self.D.nnz * 8
        out["spilled"] = spilled(self.client)
        return out

    def close(self) -> None:
        self.client.close()
        self.cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nnz", type=float, help="nonzeros (default 52e6, >= 50M once duplicates go; 2e6 --quick)"
    )
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--reps", type=int, help="timed rounds (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="2M nonzeros, 1 rep")
    parser.add_argument("--plot", help="write the figure (measured and modelled) to this PNG")
    parser.add_argument(
        "--memory-limit", help="each worker's (Dask's memory_limit, '600MB'): past it, Dask spills"
    )
    args = parser.parse_args()
    quick = (2e6, 1) if args.quick else (52e6, 3)  # what is given holds with --quick too
    args.nnz = args.nnz if args.nnz is not None else quick[0]
    args.reps = args.reps if args.reps is not None else quick[1]
    t = time.time()
    A = power_law(int(args.nnz))
    n = A.shape[0]
    print(f"matrix: {n} x {n}, {A.nnz / 1e6:.1f}M nonzeros, longest row {np.diff(A.indptr).max()}"
          f" ({time.time() - t:.1f} s to make)", flush=True)  # fmt: skip
    spmm = (REPO / "examples" / "spmm.mlir").read_text()
    spmv = (REPO / "examples" / "spmv.mlir").read_text()
    # one OpenMP thread per kernel: a worker of one thread (the host target's
    # kernels would run as many as the machine has cores in every worker)
    exe = sparsecomp.compile(_module(spmm, spmv), dataclasses.replace(detect_host(), threads=1))
    with tempfile.TemporaryDirectory(prefix="sparsecomp-dask-bench-") as tmp:
        paths = write_parts(A, args.parts, Path(tmp))
        del A
        clusters = [Cluster(w, paths, n, args.k, exe, args.memory_limit) for w in (1, 2)]
        try:
            # the clusters take turns within each round, so that a slow spell of
            # this shared machine falls on both (run one after the other, 1 against
            # 2 workers ranged from 0.85x to 1.69x over three runs)
            for name in ("spmm", "spmv"):
                for _ in range(args.reps):
                    for c in clusters:
                        c.rep(name)
            rows = [c.result() for c in clusters]
        finally:
            for c in clusters:
                c.close()
    one = rows[0]
    print(f"\n{args.parts} partitions, K = {args.k}; seconds (best of {args.reps})")
    print("| workers | SpMM | speed-up | SpMV | speed-up | PageRank / iteration | sent / iteration "
          "(expected) | matrix | graph built (SpMM) | scheduler overhead / task | of a task's "
          "kernel time |")  # fmt: skip
    print("| --- " * 11 + "|")
    failed = []
    for r in rows:
        w = r["workers"]
        # the vector to the other workers; the result's chunks to the worker that
        # puts them together (Dask's finalize runs on a worker), and back here
        expected = 4 * n * (w - 1) + 4 * n * (w - 1) / w + 4 * n
        share = r["spmm_overhead"] / r["spmm_task"]
        print(
            f"| {w} | {r['spmm']:.3f} | {one['spmm'] / r['spmm']:.2f}x | {r['spmv']:.3f} | "
            f"{one['spmv'] / r['spmv']:.2f}x | {r['pagerank']:.3f} | "
            f"{r['pagerank_bytes'] / 1e6:.2f} MB ({expected / 1e6:.2f} MB) | "
            f"{r['matrix_bytes'] / 1e6:.0f} MB | {r['spmm_build'] * 1e3:.1f} ms | "
            f"{r['spmm_overhead'] * 1e3:.1f} ms | {100 * share:.1f}% |"
        )
        if not r["pagerank_bytes"] <= 1.25 * expected + 1e5:
            failed.append(f"{w} worker(s) sent {r['pagerank_bytes']:.0f} B, not {expected:.0f} B")
    per_nnz = args.parts / (one["matrix_bytes"] / 8) * 1e9  # ns per nonzero, from a task's s
    print(
        f"\nmodel inputs (1 worker): SpMV kernel {one['spmv_task'] * per_nnz:.2f} ns "
        f"per nonzero, SpMM (K = {args.k}) {one['spmm_task'] * per_nnz:.2f} ns; "
        f"scheduler {one['spmv_overhead'] * 1e3:.1f} ms per task; a call's graph built in "
        f"{one['spmv_build'] * 1e3:.1f} ms; PageRank sends {one['pagerank_bytes'] / n:.2f} B "
        "per vertex to the client"
    )
    print("bytes per PageRank iteration: " + ("as the partitioning implies" if not failed
          else "; ".join(failed)))  # fmt: skip
    print("spilled to disk at the end: " + ", ".join(
        f"{r['workers']} worker(s) {r['spilled'] / 1e6:.0f} MB" for r in rows))  # fmt: skip
    inputs = {
        "t_e": one["spmv_task"] * per_nnz * 1e-9,
        "s": one["spmv_overhead"],
        "b": one["spmv_build"] / args.parts,
    }
    print("\nmodel, a PageRank iteration on a graph of 1B edges and 40M vertices (f32, 2 "
          "partitions a worker, 10 Gb/s links; docs/dask.md):")  # fmt: skip
    print("| workers | kernels | scheduler | graph | vector out | vector back | per iteration |")
    print("| --- " * 7 + "|")
    for w in MODEL_WORKERS:
        terms = model(w, **inputs)
        cells = " | ".join(f"{v:.2f} s" for v in terms.values())
        print(f"| {w} | {cells} | {sum(terms.values()):.2f} s |")
    if args.plot:
        plot(rows, inputs, args.plot, one["matrix_bytes"] / 8)
    return 1 if failed else 0


#: the model's cluster sizes, and its graph (docs/dask.md)
MODEL_WORKERS = (1, 16, 128)
EDGES, VERTICES, LINK = 1e9, 4e7, 1.25e9  # a graph of 1B edges; 10 Gb/s in bytes/s


def model(workers: int, t_e: float, s: float, b: float) -> dict[str, float]:
    """Seconds per PageRank iteration by term: kernels balanced by nonzeros, the
    scheduler's tasks one at a time, the graph built here, the vector spread to
    the workers (doubling its holders each round) and the new one back."""
    parts = 2 * workers
    remote = workers > 1
    return {
        "kernels": EDGES * t_e / workers,
        "scheduler": parts * s,
        "graph": parts * b,
        "vector out": math.log2(workers) * 4 * VERTICES / LINK if remote else 0.0,
        "vector back": 4 * VERTICES / LINK if remote else 0.0,
    }


def plot(rows: list[dict[str, Any]], inputs: dict[str, float], path: str, nnz: float) -> None:
    """The measured times (1 and 2 workers) beside the model's (1 to 256 workers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    names = ("spmm", "spmv", "pagerank")
    for k, r in enumerate(rows):
        left.bar([i + 0.38 * k for i in range(3)], [r[n] for n in names], 0.38,
                 label=f"{r['workers']} worker(s)")  # fmt: skip
    left.set_xticks([i + 0.19 for i in range(3)], ["SpMM K=16", "SpMV", "PageRank iter."])
    left.set_ylabel("seconds")
    left.set_title(f"measured: {nnz / 1e6:.0f}M nonzeros, this machine")
    left.legend()
    workers = [2**k for k in range(9)]
    terms = [model(w, **inputs) for w in workers]
    bottom = [0.0] * len(workers)
    for name in terms[0]:
        heights = [t[name] for t in terms]
        right.bar(range(len(workers)), heights, bottom=bottom, label=name)
        bottom = [a + h for a, h in zip(bottom, heights, strict=True)]
    right.set_xticks(range(len(workers)), [str(w) for w in workers])
    right.set_xlabel("workers")
    right.set_ylabel("seconds per iteration")
    right.set_title("model: PageRank, 1B edges, 10 Gb/s")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def _module(*texts: str) -> str:
    """Several example programs in one module (their layout aliases kept apart)."""
    out = []
    for k, text in enumerate(texts):
        out.append(re.sub(r"#(csr|sparse)(?!\w)", lambda m: f"#{m.group(1)}{k}", text))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
