"""Every environment variable sparsecomp reads, in one place (Triton's knobs).

Each knob is read when it is used, so tests can set it with ``monkeypatch``.
Knobs that change compiler output must be part of the compile cache key.
"""

from __future__ import annotations

import math
import os
from pathlib import Path


def cache_dir() -> Path:
    """``SPARSECOMP_CACHE_DIR``: root of the on-disk caches.

    Defaults to ``$XDG_CACHE_HOME/sparsecomp`` or ``~/.cache/sparsecomp``. A
    relative path is taken from the current directory (made absolute here: builds
    run in the compile daemon, in another directory).
    """
    explicit = os.environ.get("SPARSECOMP_CACHE_DIR")
    if explicit:
        return Path(os.path.abspath(explicit))
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "sparsecomp"


def reproducer_dir() -> Path | None:
    """``SPARSECOMP_REPRODUCER_DIR``: where failing pipelines write reproducers.

    ``None`` (unset) means the system temporary directory.
    """
    value = os.environ.get("SPARSECOMP_REPRODUCER_DIR")
    return Path(os.path.abspath(value)) if value else None


def compile_in_process() -> bool:
    """```SPARSECOMP_COMPILE_IN_PROCESS=1``: build in the calling process, not the compile daemon.

    For debuggers and profilers; an assertion in MLIR then aborts the caller.
    """
    return os.environ.get("SPARSECOMP_COMPILE_IN_PROCESS", "") not in ("", "0")


def compile_daemon() -> bool:
    """``SPARSECOMP_COMPILE_DAEMON=0``: each process builds in a compile server of its
    own instead of the daemon its user's processes share (:mod:`sparsecomp.compiler.daemon`)."""
    return os.environ.get("SPARSECOMP_COMPILE_DAEMON", "1") != "0"


def compile_daemon_idle() -> float:
    """``SPARSECOMP_COMPILE_DAEMON_IDLE``: seconds a compile daemon this process starts
    waits for a job before it exits (600; ``scripts/check`` sets 60, so that a CI
    run leaves no daemon behind for long)."""
    value = os.environ.get("SPARSECOMP_COMPILE_DAEMON_IDLE", "")
    try:
        seconds = float(value) if value else 600.0
    except ValueError:
        return 600.0
    if math.isnan(seconds):  # nan passed max() and ended the daemon at its first wait
        return 600.0
    return max(seconds, 1.0)


def native_calls() -> bool:
    """``SPARSECOMP_NATIVE_CALLS=0``: calls take the Python path even where the C
    call path (:mod:`sparsecomp.runtime.fastcall`) could serve them; read when a
    function is first called."""
    return os.environ.get("SPARSECOMP_NATIVE_CALLS", "1") != "0"


def specialize() -> bool:
    """``SPARSECOMP_SPECIALIZE=0``: calls whose sparse operands have other index
    widths than the kernel's convert them instead of compiling a variant for
    them (:mod:`sparsecomp.runtime.specialize`)."""
    return os.environ.get("SPARSECOMP_SPECIALIZE", "1") != "0"
