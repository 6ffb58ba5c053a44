"""Worker processes running many cases each, restarted after a crash or a timeout.

Each worker (:mod:`.worker`) runs in its own session, so a timeout kills it
and everything it started (the compile server, ``mlir-runner``). A worker
that dies in path ``p`` records ``crash`` for ``p`` with the lines its
stderr ended with; the case's remaining paths run on a fresh worker.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Result = dict[str, Any]
_KEYS = ("Assertion", "LLVM ERROR", "error", "Error", "Segmentation", "Traceback", "Aborted")


class Worker:
    """One ``python -m sparsecomp.fuzz.worker`` process and its stderr log."""

    def __init__(self, log: Path, env: dict[str, str]) -> None:
        self.log, self.env = log, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.buffer = b""

    def start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()  # a dead worker's pipes are closed before the next starts
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "sparsecomp.fuzz.worker"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                    env=self.env, start_new_session=True,
                )  # fmt: skip
            self.buffer = b""
        return self.proc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        if self.proc is not None:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
        self.proc = None

    def _line(self, deadline: float) -> bytes | None:
        """The next line; b"" at EOF; None at the deadline."""
        proc = self.proc
        assert proc is not None
        assert proc.stdout is not None
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return b""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def run(self, job: dict[str, Any], timeout: float) -> Result:
        """Every path of ``job``, one worker after another if one dies."""
        results: dict[str, Any] = {}
        done: Result = {"describe": "?", "seconds": 0.0}
        todo = list(job["paths"])
        started = time.perf_counter()
        while todo:
            proc = self.start()
            offset = self.log.stat().st_size
            assert proc.stdin is not None
            proc.stdin.write((json.dumps({**job, "paths": todo}) + "\n").encode())
            proc.stdin.flush()
            current, deadline = todo[0], time.monotonic() + timeout
            while True:
                line = self._line(deadline)
                if line is None or line == b"":
                    status = "timeout" if line is None else "crash"
                    rc = proc.wait() if line == b"" else None
                    self.stop()
                    message = self._tail(offset, status, rc, timeout)
                    results[current] = {"status": status, "message": message}
                    todo = todo[todo.index(current) + 1 :]
                    break
                msg = json.loads(line)
                if "start" in msg:
                    current, deadline = msg["start"], time.monotonic() + timeout
                elif "result" in msg:
                    results[msg["result"][0]] = msg["result"][1]
                else:
                    done = msg["done"]
                    results.update(done["results"])
                    todo = []
                    break
        done["seconds"] = time.perf_counter() - started
        return {**done, "index": job["index"], "results": results}

    def _tail(self, offset: int, status: str, rc: int | None, timeout: float) -> str:
        with self.log.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        lines = [ln.strip() for ln in text.splitlines() if any(k in ln for k in _KEYS)]
        if rc is None:
            head = f"no answer in {timeout:g} s"
        elif rc < 0:
            head = f"worker killed by {signal.Signals(-rc).name}"
        else:
            head = f"worker exited with {rc}"
        return "\n".join([head, *lines[:4]])[:2000]


def run_all(
    jobs: list[dict[str, Any]],
    workers: int,
    timeout: float,
    env: dict[str, str],
    logs: Path,
    progress: Callable[[Result], None],
) -> list[Result]:
    """Run ``jobs`` on ``workers`` processes; ``progress`` sees each result as it comes."""
    todo: queue.Queue[dict[str, Any]] = queue.Queue()
    for job in jobs:
        todo.put(job)
    results: list[Result] = []
    lock = threading.Lock()

    def serve(k: int) -> None:
        worker = Worker(logs / f"worker{k}.log", env)
        try:
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                result = worker.run(job, timeout)
                with lock:
                    results.append(result)
                    progress(result)
        finally:
            worker.stop()

    threads = [threading.Thread(target=serve, args=(k,), daemon=True) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results, key=lambda r: r["index"])
