"""Stress the compile cache and kernel loading the way several users of one machine do.

    python scripts/stress_cache.py                 # the long form: 120 s, 4 loaders
    python scripts/stress_cache.py --seconds 20    # what the test suite runs

Processes share one ``SPARSECOMP_CACHE_DIR`` and one folder of saved kernels:

- **loaders** compile the examples (cache hits, or builds after an eviction),
  load saved kernels, call each and check the result against scipy;
- a **saver** compiles them and saves them, again and again, into the saved
  kernels' folder, over the files that the loaders have loaded;
- an **evictor** removes kernel directories from the cache (a cache cleaned
  by hand, an eviction) while the others look them up, build and load them;
- a **hog** puts the machine under memory pressure: it holds and touches
  ``--hog-mb`` of memory, and drops the cache's files from the page cache so
  that they are read back from disk.

Every call must give the right result or raise a sparsecomp error; a wrong
result, another exception or a process killed by a signal fails the run
(exit status 1). The table at the end counts each role's calls and errors.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("spmv", "spmm", "sddmm")
SLOTS = 2  # saved-kernel folders the saver writes into and the loaders load from


def _check(name: str, exe: Any, rng: Any) -> None:
    """Call ``exe`` on random data and compare with scipy; AssertionError if wrong."""
    import numpy as np
    import scipy.sparse as sp

    m, n, k = int(rng.integers(50, 300)), int(rng.integers(50, 300)), 16
    a = sp.random(m, n, density=0.05, format="csr", dtype=np.float32, random_state=rng)
    if name == "spmv":
        x = rng.standard_normal(n).astype(np.float32)
        got, want = exe(a, x), a @ x
    elif name == "spmm":
        b = rng.standard_normal((n, k)).astype(np.float32)
        got, want = exe(a, b), a @ b
    else:
        x = rng.standard_normal((m, k)).astype(np.float32)
        y = rng.standard_normal((n, k)).astype(np.float32)
        got = exe(a, x, y).to_scipy().toarray()
        want = a.multiply(x @ y.T).toarray()
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        raise AssertionError(f"{name}: wrong result")


def _loader(work: Path, until: float, seed: int) -> dict[str, Any]:
    import numpy as np

    import sparsecomp
    from sparsecomp.errors import SparsecompError

    rng, pick = np.random.default_rng(seed), random.Random(seed)
    stats: dict[str, Any] = {"calls": 0, "errors": {}}
    while time.time() < until:
        if pick.random() < 0.5:
            name = pick.choice(EXAMPLES)
            what = lambda: (name, sparsecomp.compile(REPO / "examples" / f"{name}.mlir"))  # noqa: E731
        else:
            slot = work / "saved" / str(pick.randrange(SLOTS))
            what = lambda: _saved(sparsecomp.load(slot))  # noqa: E731
        try:
            name, exe = what()
            _check(name, exe, rng)
            stats["calls"] += 1
        except SparsecompError as err:  # a clear error: counted, by its first line
            first = str(err).splitlines()[0]
            key = first.split(": ", 1)[-1][:70]
            stats["errors"][key] = stats["errors"].get(key, 0) + 1
    return stats


def _saved(exe: Any) -> tuple[str, Any]:
    (name,) = exe.functions
    return name, exe


def _saver(work: Path, until: float, seed: int) -> dict[str, Any]:
    import sparsecomp
    from sparsecomp.errors import SparsecompError

    pick = random.Random(seed)
    stats: dict[str, Any] = {"calls": 0, "errors": {}}
    while time.time() < until:
        name = pick.choice(EXAMPLES)
        try:
            exe = sparsecomp.compile(REPO / "examples" / f"{name}.mlir")
            exe.save(work / "saved" / str(pick.randrange(SLOTS)))
            stats["calls"] += 1
        except SparsecompError as err:
            key = str(err).splitlines()[0][:70]
            stats["errors"][key] = stats["errors"].get(key, 0) + 1
    return stats


def _evictor(cache: Path, until: float, seed: int) -> dict[str, Any]:
    pick = random.Random(seed)
    removed = 0
    while time.time() < until:
        entries = [p for p in (cache / "kernels").glob("*") if not p.name.startswith(".")]
        if entries:
            shutil.rmtree(pick.choice(entries), ignore_errors=True)
            removed += 1
        time.sleep(pick.uniform(1.0, 4.0))
    return {"calls": removed, "errors": {}}


def _hog(cache: Path, until: float, megabytes: int) -> dict[str, Any]:
    import numpy as np

    rounds = 0
    while time.time() < until:
        held = np.ones(megabytes * 2**17)  # touched: resident
        for root, _, files in os.walk(cache):  # skips what the evictor removes meanwhile
            for name in files:
                try:
                    fd = os.open(Path(root) / name, os.O_RDONLY)
                except OSError:  # removed meanwhile
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        del held
        rounds += 1
        time.sleep(0.2)
    return {"calls": rounds, "errors": {}}


def _worker(role: str, work: Path, until: float, seed: int, hog_mb: int) -> int:
    cache = Path(os.environ["SPARSECOMP_CACHE_DIR"])
    if role == "loader":
        stats = _loader(work, until, seed)
    elif role == "saver":
        stats = _saver(work, until, seed)
    elif role == "evictor":
        stats = _evictor(cache, until, seed)
    else:
        stats = _hog(cache, until, hog_mb)
    print(json.dumps(stats), flush=True)
    return 0


def run(seconds: float, loaders: int, hog_mb: int, work: Path) -> bool:
    """One run of every role for ``seconds``; prints the table; whether it passed."""
    import sparsecomp

    os.environ["SPARSECOMP_CACHE_DIR"] = str(work / "cache")
    for name in EXAMPLES:  # warm: the loaders start on cache hits, and saved kernels exist
        exe = sparsecomp.compile(REPO / "examples" / f"{name}.mlir")
        exe.save(work / "saved" / str(EXAMPLES.index(name) % SLOTS))
    until = time.time() + seconds
    roles = [*(["loader"] * loaders), "saver", "evictor", "hog"]
    procs = []
    for i, role in enumerate(roles):
        command = [sys.executable, __file__, "--role", role, "--work", str(work),
                   "--until", str(until), "--seed", str(i), "--hog-mb", str(hog_mb)]  # fmt: skip
        procs.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    ok = True
    print(f"{'role':8s} {'calls':>6s} {'errors':>6s}  status")
    for role, proc in zip(roles, procs, strict=True):
        out, err = proc.communicate(timeout=seconds + 600)
        if proc.returncode != 0:
            ok = False
            why = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else "failed"
            print(f"{role:8s} {'':>6s} {'':>6s}  {why}\n{err[-3000:]}")
            continue
        stats = json.loads(out.strip().splitlines()[-1])
        errors = sum(stats["errors"].values())
        print(f"{role:8s} {stats['calls']:6d} {errors:6d}  ok")
        for message, count in sorted(stats["errors"].items()):
            print(f"{'':8s} {count:6d} x {message}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="length of one run")
    parser.add_argument("--loaders", type=int, default=4, help="loader processes")
    parser.add_argument("--hog-mb", type=int, default=2048, help="memory the hog holds")
    parser.add_argument("--runs", type=int, default=1, help="runs in a row, each from scratch")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return _worker(args.role, args.work, args.until, args.seed, args.hog_mb)
    passed = 0
    for k in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="sparsecomp-stress-"))
        try:
            started = time.perf_counter()
            ok = run(args.seconds, args.loaders, args.hog_mb, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {k + 1}/{args.runs}: {'passed' if ok else 'FAILED'} "
              f"in {time.perf_counter() - started:.0f} s\n", flush=True)  # fmt: skip
        if not ok:
            break
        passed += 1
    print(f"{passed} of {args.runs} runs passed")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
