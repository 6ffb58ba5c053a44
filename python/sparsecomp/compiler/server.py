"""Builds run in a compile server: an abort in MLIR or LLVM never reaches the caller.

The bindings are built with assertions on, and an assertion kills the
process it fires in. :func:`build` therefore sends each uncached build to a
worker process (``python -m sparsecomp.compiler.server``), started on the
first build, kept for the next ones (so its imports are paid once per
calling process) and started afresh after it dies. One JSON job per line on
its stdin::

    {"text": "...", "filename": "f.mlir", "target": "#sparse_iter.cpu<...>",
     "options": {...}, "out": "/.../build-dir", "verbose": false,
     "env": {"SPARSECOMP_...": "..."}}

and JSON lines back on its stdout: ``{"progress": [stage, seconds]}`` while
it works, then ``{"ok": true}`` or ``{"ok": false, "error": class name,
"message", "location", "hint"}``. The ``SPARSECOMP_*`` environment of the
caller travels with each job, so knobs set after the server started apply.
A worker that dies mid-build becomes a :class:`CompileError` naming the
signal and the assertion it printed.

``SPARSECOMP_COMPILE_IN_PROCESS=1`` builds in the calling process instead
(for debuggers and profilers).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparsecomp import errors, knobs
from sparsecomp.compiler.worker_process import WorkerProcess
from sparsecomp.errors import CompileError, SparsecompError
from sparsecomp.targets import CpuTarget, CudaTarget

Progress = Callable[[str, float], None] | None

#: How the worker is started (tests replace it).
COMMAND = [sys.executable, "-m", __name__]
_LOCK = threading.Lock()
_server: WorkerProcess | None = None


def _shutdown() -> None:
    global _server
    if _server is not None:
        _server.close()
        _server = None


atexit.register(_shutdown)


def build(
    text: str,
    filename: str,
    cpu: CpuTarget,
    options: dict[str, Any],
    out: Path,
    progress: Progress,
    emulate: CudaTarget | None = None,
    profile: bool = False,
    device: CudaTarget | None = None,
) -> None:
    """Compile ``text`` into ``out`` in the compile server; raises what the build raised."""
    if knobs.compile_in_process():
        from sparsecomp.compiler.build import build as build_here

        build_here(text, filename, cpu, options, out, progress, emulate, profile, device)
        return
    job = {
        "text": text, "filename": filename, "target": cpu.attr_text(), "options": options,
        "emulate": emulate.attr_text() if emulate is not None else None, "profile": profile,
        "device": device.attr_text() if device is not None else None,
        "out": str(out), "verbose": progress is not None,
        "env": {k: v for k, v in os.environ.items() if k.startswith("SPARSECOMP_")},
    }  # fmt: skip
    global _server
    with _LOCK:
        if _server is None or not _server.alive():
            _shutdown()
            _server = WorkerProcess(COMMAND)
        server = _server
        assert server.proc.stdin is not None
        assert server.proc.stdout is not None
        try:
            server.proc.stdin.write(json.dumps(job) + "\n")
            server.proc.stdin.flush()
        except BrokenPipeError:
            pass
        while line := server.proc.stdout.readline():
            answer = json.loads(line)
            if "progress" not in answer:
                break
            if progress is not None:
                progress(*answer["progress"])
        else:  # the worker died
            crash = server.crash()
            _shutdown()
            raise CompileError(
                f"{filename}: the compiler crashed ({crash})",
                hint="please report it with the program; SPARSECOMP_COMPILE_IN_PROCESS=1 "
                "reproduces it in a debugger",
            )
    if not answer["ok"]:
        cls = getattr(errors, answer["error"], SparsecompError)
        raise cls(answer["message"], location=answer["location"], hint=answer["hint"])


def _serve_one(job: dict[str, Any]) -> dict[str, Any]:
    from sparsecomp.compiler.build import build as build_here
    from sparsecomp.targets import target_from_attr

    for key in [k for k in os.environ if k.startswith("SPARSECOMP_")]:
        del os.environ[key]
    os.environ.update(job["env"])

    def report(stage: str, seconds: float) -> None:
        print(json.dumps({"progress": [stage, seconds]}), flush=True)

    cpu = target_from_attr(job["target"])
    assert isinstance(cpu, CpuTarget)
    emulate = target_from_attr(job["emulate"]) if job.get("emulate") else None
    assert emulate is None or isinstance(emulate, CudaTarget)
    device = target_from_attr(job["device"]) if job.get("device") else None
    assert device is None or isinstance(device, CudaTarget)
    try:
        build_here(job["text"], job["filename"], cpu, job["options"], Path(job["out"]),
                   report if job["verbose"] else None, emulate,
                   job.get("profile", False), device)  # fmt: skip
    except SparsecompError as exc:
        name = type(exc).__name__
        name = name if hasattr(errors, name) else "SparsecompError"
        return {"ok": False, "error": name, "message": exc.message, "location": exc.location,
                "hint": exc.hint}  # fmt: skip
    except Exception:  # a compiler bug: say so, with the traceback
        return {"ok": False, "error": "SparsecompError", "location": job["filename"],
                "message": f"internal compiler error:\n{traceback.format_exc()}",
                "hint": "please report it with the program"}  # fmt: skip
    return {"ok": True}


def main() -> int:
    for line in sys.stdin:
        print(json.dumps(_serve_one(json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
