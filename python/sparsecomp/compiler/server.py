"""Builds run in another process: an abort in MLIR or LLVM never reaches the caller.

The bindings are built with assertions on, and an assertion kills the
process it fires in. :func:`build` therefore sends each uncached build
elsewhere:

* to the compile daemon (:mod:`.daemon`), shared by this user's processes,
  which forks a child per build with MLIR and the passes already imported;
* where no daemon can run (no Unix sockets, ``SPARSECOMP_COMPILE_DAEMON=0``),
  to a worker process of the caller's own (``python -m
  sparsecomp.compiler.server``), started on the first build, kept for the
  next ones (so its imports are paid once per calling process) and started
  afresh after it dies.

Both take one JSON job per line::

    {"text": "...", "filename": "f.mlir", "target": "#sparse_iter.cpu<...>",
     "options": {...}, "out": "/.../build-dir", "verbose": false,
     "env": {"SPARSECOMP_...": "..."}}

and answer JSON lines: ``{"progress": [stage, seconds]}`` while it works,
then ``{"ok": true}`` or ``{"ok": false, "error": class name, "message",
"location", "hint"}`` (the daemon: ``{"crash": how}`` for a child that died).
The ``SPARSECOMP_*`` environment of the caller travels with each job, so
knobs set after the server started apply. A build that dies becomes a
:class:`CompileError` naming the signal and the assertion it printed.

``SPARSECOMP_COMPILE_IN_PROCESS=1`` builds in the calling process instead
(for debuggers and profilers).
"""

from __future__ import annotations

import atexit
import json
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparsecomp import errors, forksafe, knobs
from sparsecomp.compiler import daemon, jobs
from sparsecomp.compiler.worker_process import WorkerProcess
from sparsecomp.errors import CompileError, SparsecompError
from sparsecomp.targets import CpuTarget, CudaTarget

Progress = Callable[[str, float], None] | None

#: How the worker is started (tests replace it, which also turns the daemon off).
COMMAND = [sys.executable, "-m", __name__]
_DEFAULT_COMMAND = list(COMMAND)
_LOCK = forksafe.lock()
_server: WorkerProcess | None = None


def _shutdown() -> None:
    global _server
    if _server is not None:
        _server.close()
        _server = None


atexit.register(_shutdown)


def _forget() -> None:
    """A forked child starts a worker of its own: the parent's pipes are the parent's
    (and closing them at the child's exit would stop the parent's worker)."""
    global _server
    _server = None


forksafe.after_fork(_forget)


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
    emulate_devices: bool = False,
) -> None:
    """Compile ``text`` into ``out`` in the compile server; raises what the build raised."""
    if knobs.compile_in_process():
        from sparsecomp.compiler.build import build as build_here

        build_here(
            text, filename, cpu, options, out, progress, emulate, profile, device, emulate_devices
        )
        return
    job = _job(text, filename, cpu, options, out, progress, emulate, profile, device,
               emulate_devices)  # fmt: skip
    answer = _prefetched_answer(job)
    if answer is not None and "crash" in answer:
        raise _crashed(filename, answer["crash"])
    if answer is None and _daemon_wanted():
        answer = _by_daemon(job, filename, progress)
    if answer is None:
        answer = _by_worker(job, filename, progress)
    if not answer["ok"]:
        cls = getattr(errors, answer["error"], SparsecompError)
        raise cls(answer["message"], location=answer["location"], hint=answer["hint"])


def _job(
    text: str,
    filename: str,
    cpu: CpuTarget,
    options: dict[str, Any],
    out: Path,
    progress: Progress,
    emulate: CudaTarget | None = None,
    profile: bool = False,
    device: CudaTarget | None = None,
    emulate_devices: bool = False,
) -> dict[str, Any]:
    """The JSON job of a build (see the module), the caller's knobs with it."""
    return {
        "text": text, "filename": filename, "target": cpu.attr_text(), "options": options,
        "emulate": emulate.attr_text() if emulate is not None else None, "profile": profile,
        "device": device.attr_text() if device is not None else None,
        "emulate_devices": emulate_devices,
        "out": str(out), "verbose": progress is not None,
        "env": jobs.knobs_environment(),
    }  # fmt: skip


class _Prefetch(threading.Thread):
    """A job sent to the daemon before its caller asks for the build (:func:`prefetch`);
    ``answer`` the daemon's once joined (None: no daemon answered)."""

    def __init__(self, job: dict[str, Any], progress: Progress) -> None:
        super().__init__(name="sparsecomp prefetched build", daemon=True)
        self.job = job
        self.progress = progress
        self.answer: dict[str, Any] | None = None
        self._lock = forksafe.lock()
        self._dropped = False

    def run(self) -> None:
        try:
            self.answer = daemon.exchange(self.job, self.progress)
        finally:
            with self._lock:
                if self._dropped:
                    shutil.rmtree(self.job["out"], ignore_errors=True)

    def drop(self) -> None:
        """Nobody takes this build: its directory goes once it is done (without waiting
        here; one left by a process that ended first is removed as stale by the cache)."""
        with self._lock:
            self._dropped = True
            if not self.is_alive():
                shutil.rmtree(self.job["out"], ignore_errors=True)


_prefetch: _Prefetch | None = None
_PREFETCH_LOCK = forksafe.lock()


def prefetch(text: str, filename: str, cpu: CpuTarget, options: dict[str, Any],
             progress: Progress) -> None:  # fmt: skip
    """Send the daemon the build that :func:`build` is about to be asked for, now, in a
    background thread: ``sparsecomp-compile`` does so before it imports the driver and
    the runtime (0.12-0.14 s), so that a cold compile waits for the longer of that and
    the build, not their sum. :func:`build` takes the answer where its job is the same
    (the text, the target, the options, the knobs; the build directory aside) and
    moves the built files into its own directory; any other job drops it
    (:func:`forget_prefetch`). Nothing is sent where builds do not go to the daemon."""
    global _prefetch
    if knobs.compile_in_process() or not _daemon_wanted():
        return
    from sparsecomp.compiler import cache

    try:
        out = cache.new_build_dir()
    except SparsecompError:  # the build says so
        return
    job = _job(text, filename, cpu, options, out, progress)
    forget_prefetch()
    started = _Prefetch(job, progress)
    started.start()
    with _PREFETCH_LOCK:
        _prefetch = started


def forget_prefetch() -> None:
    """Drop a prefetched build nobody took (a cached kernel, another job)."""
    global _prefetch
    with _PREFETCH_LOCK:
        taken, _prefetch = _prefetch, None
    if taken is not None:
        taken.drop()


def _forget_prefetch_in_child() -> None:
    global _prefetch
    _prefetch = None  # the parent's thread and build


forksafe.after_fork(_forget_prefetch_in_child)


def _prefetched_answer(job: dict[str, Any]) -> dict[str, Any] | None:
    """The prefetched build's answer where it built ``job`` (its files moved into
    ``job["out"]``); None where there was none, it was another job or no daemon took it."""
    global _prefetch
    with _PREFETCH_LOCK:
        taken, _prefetch = _prefetch, None
    if taken is None:
        return None
    same = {k: v for k, v in taken.job.items() if k != "out"}
    if same != {k: v for k, v in job.items() if k != "out"}:
        taken.drop()
        return None
    taken.join()
    built = Path(taken.job["out"])
    if taken.answer is not None and taken.answer.get("ok"):
        for path in built.iterdir():
            path.rename(Path(job["out"]) / path.name)
    shutil.rmtree(built, ignore_errors=True)
    return taken.answer


def print_progress(stage: str, seconds: float) -> None:
    """``-v``'s line for a stage of a build (``verbose=True``)."""
    print(f"sparsecomp: {stage:8s} {seconds * 1000:8.1f} ms", file=sys.stderr)


def _daemon_wanted() -> bool:
    """The daemon, unless it is turned off or a test replaced the worker's command."""
    return knobs.compile_daemon() and COMMAND == _DEFAULT_COMMAND


def _crashed(filename: str, how: str) -> CompileError:
    return CompileError(
        f"{filename}: the compiler crashed ({how})",
        hint="please report it with the program; SPARSECOMP_COMPILE_IN_PROCESS=1 "
        "reproduces it in a debugger",
    )


def _by_daemon(job: dict[str, Any], filename: str, progress: Progress) -> dict[str, Any] | None:
    """The answer of the compile daemon; None where there is no daemon to ask."""
    answer = daemon.exchange(job, progress)
    if answer is not None and "crash" in answer:
        raise _crashed(filename, answer["crash"])
    return answer


def _by_worker(job: dict[str, Any], filename: str, progress: Progress) -> dict[str, Any]:
    """The answer of this process's own worker (started if it is not running)."""
    global _server
    with _LOCK:
        if _server is None or not _server.alive():
            _shutdown()
            _server = WorkerProcess(COMMAND)
        server = _server
        assert server.proc.stdin is not None
        assert server.proc.stdout is not None
        try:
            try:
                server.proc.stdin.write(json.dumps(job) + "\n")
                server.proc.stdin.flush()
            except BrokenPipeError:
                pass
            answer = daemon.read_answer(iter(server.proc.stdout.readline, ""), progress)
        except BaseException:
            # interrupted mid-exchange (Ctrl-C): the worker's answer would be read as the
            # next job's (every later compile in the process failed on another build's
            # files); the next build starts a new worker
            _shutdown()
            raise
        if answer is None:  # the worker died
            crash = server.crash()
            _shutdown()
            raise _crashed(filename, crash)
    return answer


def main() -> int:
    from sparsecomp.ir import light_dialects

    light_dialects.prefer()

    def emit(message: dict[str, Any]) -> None:
        print(json.dumps(message), flush=True)

    for line in sys.stdin:
        emit(jobs.build_job(json.loads(line), emit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
