"""The upstream fallback's worker process: an abort in an upstream pass stays there.

:func:`run` (parent side) starts ``python -m sparsecomp.compiler.upstream_worker``
and writes one JSON job to its stdin::

    {"input": ".../upstream.mlir", "filename": "user.mlir", "pipeline": "...",
     "output": ".../upstream-llvm.mlir"}

The worker (:func:`lower`) parses ``input`` (sparsecomp context, file
locations kept), runs ``builtin.module(<pipeline>)`` (upstream passes and
sparsecomp's, see :mod:`sparsecomp.transforms.pipeline`), writes the
LLVM-dialect result to ``output`` and
answers one JSON line on stdout: ``{"ok": true, "needs": [...]}`` or
``{"ok": false, "diagnostics": ["file:line:col: error: ..."]}``. If a pass
asserts, the worker dies and :func:`run` reports the signal and the
assertion it printed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparsecomp.compiler import upstream

_SOURCE = re.compile(r"([\w.-]+\.(?:cpp|h|hpp|inc)):(\d+)")


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
    }
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", __name__],
        input=json.dumps(job), capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    answer = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not answer:
        return Lowered(False, crash=crash_summary(proc.returncode, proc.stderr))
    result = json.loads(answer[-1])
    return Lowered(result["ok"], result.get("needs", []), result.get("diagnostics", []))


def crash_summary(returncode: int, stderr: str) -> str:
    """``SIGABRT: Assertion `...' failed (File.cpp:123)``, or the last line it printed."""
    how = signal.Signals(-returncode).name if returncode < 0 else f"exit status {returncode}"
    lines = stderr.strip().splitlines() or ["(no output)"]
    said = next((ln for ln in lines if "Assertion" in ln), lines[-1]).strip()
    if "Assertion" in said:
        source = _SOURCE.search(said)
        said = said[said.index("Assertion") :].removesuffix(".")
        said += f" ({source.group(1)}:{source.group(2)})" if source else ""
    return f"{how}: {said[:300]}"


def lower(job: dict[str, Any]) -> dict[str, Any]:
    """The worker's side: run the job, answer what :class:`Lowered` holds."""
    from mlir import ir

    from sparsecomp.compiler import aot
    from sparsecomp.errors import SparsecompError
    from sparsecomp.ir.context import make_context
    from sparsecomp.ir.parsing import DiagnosticLog, parse_module
    from sparsecomp.tools.diagnostics import format_diagnostic
    from sparsecomp.transforms.pipeline import build_pass_manager

    ctx = make_context()
    log = DiagnosticLog(job["filename"])
    try:
        with log.capture(ctx), ctx:
            module = parse_module(Path(job["input"]).read_text(), job["filename"], ctx)
            build_pass_manager(f"builtin.module({job['pipeline']})", ctx).run(module.operation)
            Path(job["output"]).write_text(module.operation.get_asm(enable_debug_info=True))
            needs = aot.runtime_needs(module)
    except (ir.MLIRError, SparsecompError) as exc:
        lines = [format_diagnostic(d) for d in log.diagnostics]
        if isinstance(exc, SparsecompError):
            lines.append(exc.render())
        return {"ok": False, "diagnostics": lines}
    return {"ok": True, "needs": needs}


def main() -> int:
    print(json.dumps(lower(json.loads(sys.stdin.read()))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
