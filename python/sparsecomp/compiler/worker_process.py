"""A worker process of the compiler: started with a command, asked over pipes, and its
stderr kept in a file, so that a death (an assertion in MLIR or LLVM) can be told
with the signal and the assertion it printed (:func:`crash_summary`).

The compile server (:mod:`.server`) and the sparsifier's worker
(:mod:`.upstream_worker`) are such processes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

_SOURCE = re.compile(r"([\w.-]+\.(?:cpp|h|hpp|inc)):(\d+)")


def child_environment() -> dict[str, str]:
    """This process's environment with this package importable (first on ``PYTHONPATH``),
    for the compiler's own child processes."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


class WorkerProcess:
    """``command`` running with pipes on stdin and stdout, this package importable,
    and its stderr going to a temporary file."""

    def __init__(self, command: Sequence[str]) -> None:
        env = child_environment()
        self.stderr: IO[str] = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, env=env,
        )  # fmt: skip

    def alive(self) -> bool:
        return self.proc.poll() is None

    def crash(self) -> str:
        """How it died (it has, or is about to): :func:`crash_summary` of its stderr."""
        returncode = self.proc.wait()
        self.stderr.seek(0)
        return crash_summary(returncode, self.stderr.read())

    def close(self) -> None:
        """End it: its stdin closed (its loop ends), a kill after 10 s."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:  # BrokenPipeError: it died with a job unread
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


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
