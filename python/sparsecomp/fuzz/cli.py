"""``scripts/fuzz``: run random cases, print the classes of outcomes, save reproducers.

    scripts/fuzz --cases 300 --jobs 2 --out fuzz-out
    scripts/fuzz --seed 0 --replay 17        # one case, in this process, verbosely

Exit status 1 when a case crashed, gave a wrong result, printed a Python
traceback or timed out on the ``py`` or ``cli`` path (the upstream path is
a second opinion and never fails the run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PATHS = ("py", "cli", "upstream")
#: Paths run only when asked for (``--paths py,emu``): the CUDA schedule, emulated.
EXTRA_PATHS = ("emu",)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=100, help="number of cases (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the case set (default 0)")
    p.add_argument("--start", type=int, default=0, help="index of the first case (default 0)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument(
        "--paths",
        default=",".join(PATHS),
        help="subset of py,cli,upstream,emu (emu, not by default: the CUDA schedule on the CPU)",
    )
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per case and path")
    p.add_argument("--out", type=Path, default=Path("fuzz-out"), help="report and reproducers")
    p.add_argument("--repros", type=int, default=3, help="reproducers kept per failing class")
    p.add_argument("--replay", type=int, metavar="INDEX", help="run one case here and show it")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def replay(seed: int, index: int, paths: list[str], timeout: float) -> int:
    from sparsecomp.fuzz.case import make_case
    from sparsecomp.fuzz.mainwrap import main_program
    from sparsecomp.fuzz.worker import run_case

    case = make_case(seed, index)
    print(f"// {case.prog.describe()}\n{case.kernel}")
    print(f"// main() for the cli and upstream paths:\n{main_program(case.prog, case.arrays)}")
    for name, array in case.arrays.items():
        print(f"{name} =\n{array}")
    print(f"expected =\n{case.expected}")
    done = run_case({"seed": seed, "index": index, "paths": paths, "timeout": timeout})
    bad = 0
    for path, out in done["results"].items():
        print(f"{path}: {out['status']}\n  {out['message']}")
        bad += out["status"] not in ("ok", "refused", "skipped") and path != "upstream"
    return 1 if bad else 0


def _progress(quiet: bool, total: int, started: float, seen: list[int]) -> Any:
    def show(result: dict[str, Any]) -> None:
        seen[0] += 1
        bad = {p: o["status"] for p, o in result["results"].items()
               if o["status"] not in ("ok", "refused", "skipped") and p != "upstream"}  # fmt: skip
        if quiet:
            return
        if bad or seen[0] % 25 == 0:
            took = time.perf_counter() - started
            note = f" {bad} {result['describe'][:100]}" if bad else ""
            print(f"[{seen[0]}/{total} {took:.0f}s] case {result['index']}{note}", flush=True)

    return show


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    if unknown := set(paths) - set(PATHS) - set(EXTRA_PATHS):
        known = ", ".join((*PATHS, *EXTRA_PATHS))
        print(f"scripts/fuzz: unknown paths {sorted(unknown)}; known: {known}")
        return 2
    if args.replay is not None:
        return replay(args.seed, args.replay, paths, args.timeout)
    from sparsecomp.fuzz import pool, report

    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("SPARSECOMP_CACHE_DIR", str((args.out / "cache").resolve()))
    jobs = [{"seed": args.seed, "index": i, "paths": paths, "timeout": args.timeout}
            for i in range(args.start, args.start + args.cases)]  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-logs-") as logs:
        show = _progress(args.quiet, len(jobs), started, [0])
        results = pool.run_all(jobs, max(1, args.jobs), args.timeout, env, Path(logs), show)
    seconds = time.perf_counter() - started
    with (args.out / "results.jsonl").open("w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    text, failing = report.summary(results, args.seed, seconds)
    written = report.write_reproducers(results, args.seed, args.out, args.repros)
    text += f"\n{written} reproducers under {args.out}/"
    (args.out / "report.txt").write_text(text + "\n")
    print(text)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
