"""The upstream fallback's worker process: an abort in an upstream pass stays there.

:func:`run` (parent side) sends each job to the compile daemon, which runs
it in a child of its own (:mod:`.daemon`), or where there is none
(``SPARSECOMP_COMPILE_DAEMON=0``) to a worker process (``python -m
sparsecomp.compiler.upstream_worker``), started on first use, kept for the
next jobs (its imports, a third of a second, are paid once per compiling
process) and started afresh after it dies. One JSON job per line on its stdin::

    {"input": ".../upstream.mlir", "filename": "user.mlir", "pipeline": "...",
     "output": ".../upstream-llvm.mlir", "env": {"SPARSECOMP_...": "..."}}

The worker (:func:`.jobs.upstream_job`) parses ``input`` (sparsecomp context, file
locations kept), runs ``builtin.module(<pipeline>)`` (upstream passes and
sparsecomp's, see :mod:`sparsecomp.transforms.pipeline`), writes the
LLVM-dialect result to ``output`` and
answers one JSON line on stdout: ``{"ok": true, "needs": [...]}`` or
``{"ok": false, "diagnostics": ["file:line:col: error: ..."]}``. If a pass
asserts, the worker dies and :func:`run` reports the signal and the
assertion it printed (what it wrote to stderr during that job).
"""

from __future__ import annotations

import atexit
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparsecomp import forksafe, knobs
from sparsecomp.compiler import daemon, jobs, upstream
from sparsecomp.compiler.worker_process import WorkerProcess


@dataclass
class Lowered:
    """What the worker did: ``needs`` on success, else diagnostics or the crash it died of."""

    ok: bool
    needs: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    crash: str = ""
    #: built by the densified last try: why the first try failed (its crash or error)
    densified: str = ""


def run(out: Path, filename: str, pipeline: str) -> Lowered:
    """Run ``pipeline`` on ``out/upstream.mlir`` in a worker process.

    A threaded pipeline that fails is tried once more with sequential
    sparsifier loops (:func:`upstream.sequential`); if that fails too, with
    every op on sparse tensors computed dense (:func:`upstream.densified`,
    threaded, then sequential), and the answer
    says so (``densified``); if every try fails, the first failure is the
    answer.
    """
    done = _run_once(out, filename, pipeline)
    if done.ok:
        return done
    sequential = upstream.sequential(pipeline)
    dense = [upstream.densified(p) for p in (pipeline, sequential) if p is not None]
    for retry in [sequential, *dense]:
        if retry is None or retry == pipeline:
            continue
        again = _run_once(out, filename, retry)
        if again.ok:
            if retry in dense:
                again.densified = done.crash or (done.diagnostics or ["it failed"])[0]
            return again
    return done


def _run_once(out: Path, filename: str, pipeline: str) -> Lowered:
    job = {
        "input": str(out / upstream.INPUT),
        "filename": filename,
        "pipeline": pipeline,
        "output": str(out / upstream.OUTPUT),
        "env": jobs.knobs_environment(),
    }
    if knobs.compile_daemon():  # a child of the daemon's per job (see .daemon)
        answer = daemon.exchange({**job, "kind": jobs.UPSTREAM})
        if answer is not None:
            if "crash" in answer:
                return Lowered(False, crash=answer["crash"])
            return Lowered(answer["ok"], answer.get("needs", []), answer.get("diagnostics", []))
    with _LOCK:
        global _worker
        if _worker is None or _worker.proc.poll() is not None:
            if _worker is not None:
                _worker.close()
            _worker = _Worker()
        worker = _worker
        answer = worker.ask(job)
        if answer is None:  # it died on this job
            crash = worker.crash()
            worker.close()
            _worker = None
            return Lowered(False, crash=crash)
    return Lowered(answer["ok"], answer.get("needs", []), answer.get("diagnostics", []))


class _Worker(WorkerProcess):
    """The worker process, asked one job at a time."""

    def __init__(self) -> None:
        super().__init__([sys.executable, "-m", __name__])

    def ask(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """The worker's answer to ``job``; None if it died."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.stderr.seek(0)
        self.stderr.truncate()  # what it says from now on is about this job
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None


_LOCK = forksafe.lock()
_worker: _Worker | None = None


@atexit.register
def _shutdown() -> None:
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


def _forget() -> None:
    """A forked child starts a worker of its own (the parent's pipes are the parent's)."""
    global _worker
    _worker = None


forksafe.after_fork(_forget)


def main() -> int:
    for line in sys.stdin:
        print(json.dumps(jobs.upstream_job(json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
