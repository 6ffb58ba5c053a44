"""A fuzz worker process: ``python -m sparsecomp.fuzz.worker``.

Reads one JSON job per line on stdin (``{"seed", "index", "paths",
"timeout"}``) and answers on its original stdout, which it keeps for itself
(everything else it or MLIR prints goes to stderr): ``{"start": path}``
before each path, so the parent knows which one was running if the process
dies, ``{"result": [path, outcome]}`` after it, then ``{"done": {...}}``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO, Any

from sparsecomp.fuzz import paths
from sparsecomp.fuzz.case import Case, make_case


def _send(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def run_case(job: dict[str, Any], out: IO[str] | None = None) -> dict[str, Any]:
    """Run one case on the requested paths; report progress to ``out``."""
    started = time.perf_counter()
    try:
        case: Case = make_case(job["seed"], job["index"])
    except Exception as exc:
        tb = "".join(traceback.format_exception(exc)[-4:])
        failure = paths.outcome("traceback", f"fuzzer: {type(exc).__name__}: {exc}\n{tb}")
        return {"describe": "?", "results": {"gen": failure}, "seconds": 0.0}
    results: dict[str, paths.Outcome] = {}
    work = Path(tempfile.mkdtemp(prefix="fuzz-case-"))
    try:
        for path in job["paths"]:
            if out is not None:
                _send(out, {"start": path})
            if path == "py":
                results[path] = paths.run_py(case)
            elif path == "emu":
                results[path] = paths.run_py(case, "cuda-emu:sm_80")
            elif path == "cli":
                results[path] = paths.run_cli(case, work, job["timeout"])
            else:
                results[path] = paths.run_upstream(case, work, job["timeout"])
            if out is not None:
                _send(out, {"result": [path, results[path]]})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "describe": case.prog.describe(),
        "results": results,
        "seconds": time.perf_counter() - started,
    }


def main() -> int:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # kernels, MLIR and subprocesses print to stderr, not into the protocol
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if line.strip():
            job = json.loads(line)
            print(f"== fuzz case {job['seed']}:{job['index']}", file=sys.stderr, flush=True)
            _send(out, {"done": run_case(job, out)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
