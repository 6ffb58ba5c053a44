"""The jobs a build server runs: a whole build (:func:`build_job`, asked by
:mod:`.server`) or the upstream sparsifier's part of one (:func:`upstream_job`,
asked by :mod:`.upstream_worker`). The compile daemon (:mod:`.zygote`) runs
both kinds, told apart by the job's ``"kind"`` (:func:`run`); the
per-process workers one kind each."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparsecomp import errors
from sparsecomp.errors import SparsecompError
from sparsecomp.targets import CpuTarget, CudaTarget

#: Sends a message (progress) to the job's client.
Emit = Callable[[dict[str, Any]], None]
#: ``"kind"`` of the sparsifier's jobs (the others are builds).
UPSTREAM = "upstream"


#: Knobs that name a directory: a relative one means the caller's working directory.
PATH_KNOBS = ("SPARSECOMP_CACHE_DIR", "SPARSECOMP_REPRODUCER_DIR")


def knobs_environment() -> dict[str, str]:
    """The ``SPARSECOMP_*`` knobs of this process: what a job carries (its ``"env"``).
    Directories are made absolute here: the daemon runs in another working directory
    (a relative ``SPARSECOMP_CACHE_DIR`` failed every build there)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("SPARSECOMP_")}
    for key in PATH_KNOBS:
        if env.get(key):
            env[key] = os.path.abspath(env[key])
    return env


def use_environment(job: dict[str, Any]) -> None:
    """The caller's ``SPARSECOMP_*`` knobs, which the job carries, in place of ours."""
    for key in [k for k in os.environ if k.startswith("SPARSECOMP_")]:
        del os.environ[key]
    os.environ.update(job.get("env", {}))


def run(job: dict[str, Any], emit: Emit) -> dict[str, Any]:
    """The answer to a job of either kind (an error answer for a malformed one)."""
    upstream = job.get("kind") == UPSTREAM
    try:
        return upstream_job(job) if upstream else build_job(job, emit)
    except Exception:  # a job this code cannot read: say so, with the traceback
        message = f"internal compiler error:\n{traceback.format_exc()}"
        if upstream:
            return {"ok": False, "diagnostics": [message]}
        return {"ok": False, "error": "SparsecompError", "location": job.get("filename", ""),
                "message": message, "hint": "please report it with the program"}  # fmt: skip


def upstream_job(job: dict[str, Any]) -> dict[str, Any]:
    """The sparsifier's pipeline on a module (:mod:`.upstream_worker`): its answer,
    what :class:`~.upstream_worker.Lowered` holds."""
    from mlir import ir

    from sparsecomp.compiler import aot
    from sparsecomp.ir.context import make_context
    from sparsecomp.ir.parsing import DiagnosticLog, parse_module
    from sparsecomp.tools.diagnostics import format_diagnostic
    from sparsecomp.transforms.pipeline import build_pass_manager

    use_environment(job)
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


def build_job(job: dict[str, Any], emit: Emit) -> dict[str, Any]:
    """Run one build job here; ``emit`` sends its progress messages. Its answer."""
    from sparsecomp.compiler.build import build as build_here
    from sparsecomp.targets import target_from_attr

    use_environment(job)

    def report(stage: str, seconds: float) -> None:
        emit({"progress": [stage, seconds]})

    cpu = target_from_attr(job["target"])
    assert isinstance(cpu, CpuTarget)
    emulate = target_from_attr(job["emulate"]) if job.get("emulate") else None
    assert emulate is None or isinstance(emulate, CudaTarget)
    device = target_from_attr(job["device"]) if job.get("device") else None
    assert device is None or isinstance(device, CudaTarget)
    try:
        build_here(job["text"], job["filename"], cpu, job["options"], Path(job["out"]),
                   report if job["verbose"] else None, emulate,
                   job.get("profile", False), device,
                   job.get("emulate_devices", False))  # fmt: skip
    except SparsecompError as exc:
        name = type(exc).__name__
        name = name if hasattr(errors, name) else "SparsecompError"
        return {"ok": False, "error": name, "message": exc.message, "location": exc.location,
                "hint": exc.hint}  # fmt: skip
    except OSError as exc:  # the machine's, not the compiler's: a full disk, no permission
        where = f" ({exc.filename})" if exc.filename else ""
        return {"ok": False, "error": "SparsecompError", "location": job["filename"],
                "message": f"cannot write the build{where}: {exc.strerror or exc}",
                "hint": "free space there, or set SPARSECOMP_CACHE_DIR to a writable "
                        "directory with room"}  # fmt: skip
    except Exception:  # a compiler bug: say so, with the traceback
        return {"ok": False, "error": "SparsecompError", "location": job["filename"],
                "message": f"internal compiler error:\n{traceback.format_exc()}",
                "hint": "please report it with the program"}  # fmt: skip
    return {"ok": True}
