"""The compile daemon, shared by the processes of one user and one installation:
how a client finds it, starts it and asks it (the daemon itself: :mod:`.zygote`).

A build needs MLIR and sparsecomp's passes imported: 0.3-0.5 s before its
first stage, which a cold compile in a new process used to pay in the compile
server it started (:mod:`.server`). The daemon pays it once: it imports
them, listens on a Unix socket, and forks a child for each build (a
*zygote*, as Android's app server and CPython's ``forkserver`` are), so

* a cold compile in a new process costs the build's stages alone;
* each build is a process of its own: an assertion in MLIR or LLVM ends that
  child, and the daemon tells its client the signal and the assertion
  (:func:`.worker_process.crash_summary`) and goes on;
* builds of several processes (``pytest -n 2``, a script's subprocesses) run
  side by side.

Its address is a socket in a private directory (``$XDG_RUNTIME_DIR``, else
or where that path would be too long for a socket, the temporary directory:
``sparsecomp-<uid>/``, mode 0700), named by a key of
the Python executable, this package's directory and the sizes and times of
its source files, and ``PATH`` (the C compiler it finds): a changed
installation starts a daemon of its own, and the old one leaves when idle.
The first client that finds no daemon starts it (under the directory's file
lock, :data:`START_LOCK`, so that two clients do not start two) and waits for
its socket; a daemon that leaves removes its socket, and its log (the socket's
``.log``, its stderr) where nothing was written there. A directory that is not
the user's alone (another owner, or open to others) is not used: the
caller builds in a compile server of its own. The daemon leaves after
:data:`.zygote.IDLE_SECONDS` without a job (``SPARSECOMP_COMPILE_DAEMON_IDLE``).
A job is one JSON line in, progress lines and the answer out (:mod:`.jobs`:
a build, or the sparsifier's part of one).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from sparsecomp import forksafe, knobs
from sparsecomp.compiler.worker_process import child_environment

#: Seconds a client waits for a daemon it started to listen.
START_SECONDS = 60.0
#: Seconds a client waits for the daemon to take a job (to connect, and for the
#: child it forks to say so): a fork away on a healthy daemon, even under load.
ACCEPT_SECONDS = 20.0
#: Set when the daemon did not take a job in time: this process asks it no more.
_unresponsive = False
#: The lock a client holds while it looks for a daemon and starts one (any key).
START_LOCK = "start.lock"
#: The longest socket path ``AF_UNIX`` takes (108 bytes with the terminating NUL).
_MAX_PATH = 107
_PACKAGE = Path(__file__).resolve().parents[1]


def _fingerprint() -> str:
    """Sizes and modification times of this package's Python files and pipelines."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in (".py", ".txt", ".so") and "__pycache__" not in path.parts:
            st = path.stat()
            h.update(f"{path.relative_to(_PACKAGE)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


@functools.cache
def address() -> Path:
    """The socket of the daemon for this installation (see the module); computed once
    per process, so that a process keeps the daemon of the code it runs."""
    key = hashlib.sha256(
        "\0".join([sys.executable, str(_PACKAGE), _fingerprint(), os.environ.get("PATH", "")])
        .encode()
    ).hexdigest()[:20]  # fmt: skip
    name = Path(f"sparsecomp-{os.getuid()}") / f"{key}.sock"
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    if len(str(Path(base) / name)) > _MAX_PATH:  # a socket's path is short
        base = tempfile.gettempdir()
    return Path(base) / name


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(ACCEPT_SECONDS)  # a full backlog of a stopped daemon blocks connect
    try:
        sock.connect(str(path))
    except OSError:  # TimeoutError among them
        sock.close()
        return None
    return sock


class _Early(threading.Thread):
    """:func:`connect` run in the background; ``sock`` its connection once joined."""

    def __init__(self) -> None:
        super().__init__(name="sparsecomp daemon connection", daemon=True)
        self.sock: socket.socket | None = None
        self._lock = forksafe.lock()
        self._dropped = False

    def run(self) -> None:
        sock = _connect_or_start()
        with self._lock:
            if self._dropped and sock is not None:
                sock.close()
                sock = None
            self.sock = sock

    def drop(self) -> None:
        """Close the connection, now or (still being made) as soon as it is made."""
        with self._lock:
            self._dropped = True
            if self.sock is not None:
                self.sock.close()
                self.sock = None


_early: _Early | None = None
_early_lock = forksafe.lock()


def connect_early() -> None:
    """Begin :func:`connect` in a background thread; the next :func:`connect` takes its
    connection.

    For a caller with work of its own before its first build: ``sparsecomp-compile``
    imports the driver (about 0.12 s) while a daemon it starts imports MLIR and the
    passes (0.3-0.4 s) on another core, so a cold compile waits for the longer of the
    two instead of their sum (a cold ``examples/spmm.mlir``: 0.77 -> 0.68 s wall with
    the daemon's deferred imports, :mod:`.zygote`). One nobody takes is closed by
    :func:`forget_early`, or with the process; the child the daemon forked for it reads
    no job and exits.
    """
    global _early
    with _early_lock:
        if _early is None:
            _early = _Early()
            _early.start()


def _forget_early() -> None:
    """A forked child does not take the parent's early connection (one socket, two
    processes' jobs on it)."""
    global _early
    _early = None


forksafe.after_fork(_forget_early)


def _take_early() -> _Early | None:
    """The early connection's thread, if any, now no longer the next connect's."""
    global _early
    with _early_lock:
        early, _early = _early, None
    return early


def forget_early() -> None:
    """Close the connection :func:`connect_early` made if no :func:`connect` took it (a
    cached build asks no daemon; its child in the daemon then reads no job and exits),
    or will make."""
    early = _take_early()
    if early is not None:
        early.drop()  # without waiting: a daemon it is starting goes on starting


def connect() -> socket.socket | None:
    """A connection to the daemon, started if none listens; None where no daemon can
    run (no Unix sockets, a path too long, a daemon that failed to start). The first
    call after :func:`connect_early` takes that connection."""
    early = _take_early()
    if early is not None:
        early.join()
        if early.sock is not None:
            return early.sock
    return _connect_or_start()


def _connect_or_start() -> socket.socket | None:
    if not hasattr(socket, "AF_UNIX"):
        return None
    path = address()
    if len(str(path)) > _MAX_PATH:
        return None
    if not _private(path.parent):
        return None
    if (sock := _connect(path)) is not None:
        return sock
    try:
        # One lock for the directory, not one per daemon: a file per installation
        # (each source change makes a new key) piled up there, never removed.
        with open(path.parent / START_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one client starts it; the others wait
            if (sock := _connect(path)) is not None:
                return sock
            return _start(path)
    except (OSError, subprocess.SubprocessError):  # no directory, lock or start: no daemon
        return None


def _private(directory: Path) -> bool:
    """Whether ``directory`` (made if missing) is this user's alone: a daemon another
    user could listen in would build this user's kernels."""
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        st = directory.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


def _start(path: Path) -> socket.socket | None:
    """Start the daemon for ``path`` and connect to it."""
    idle = knobs.compile_daemon_idle()
    env = child_environment()
    with open(path.with_suffix(".log"), "w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "sparsecomp.compiler.zygote", str(path), str(idle)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env,
            timeout=START_SECONDS, check=False,
        )  # fmt: skip
    return _connect(path) if done.returncode == 0 else None


def exchange(
    job: dict[str, Any], progress: Callable[[str, float], None] | None = None
) -> dict[str, Any] | None:
    """The daemon's answer to ``job`` (``{"crash": how}`` where the child running it
    died), its progress messages passed to ``progress``; None where no daemon runs.

    A connection that ends without a word (a daemon that left or was killed before it
    took the job) is tried once more, on the daemon :func:`connect` finds or starts.
    A daemon that does not take the job within :data:`ACCEPT_SECONDS` (stopped with
    SIGSTOP, or hung: its clients waited forever) is given up for this process, whose
    builds then go to a compile server of its own (None)."""
    global _unresponsive
    for _ in range(2):
        sock = None if _unresponsive else connect()
        if sock is None:
            return None
        heard: list[str] = []
        answer = None
        with sock, sock.makefile("r") as lines, contextlib.suppress(ConnectionError):
            sock.settimeout(ACCEPT_SECONDS)
            try:
                sock.sendall((json.dumps(job) + "\n").encode())
                taken = lines.readline()  # the child's {"accepted": true}
            except TimeoutError:
                _unresponsive = True
                return None
            sock.settimeout(None)  # a build takes what it takes
            if taken:
                answer = read_answer(_noting(itertools.chain([taken], lines), heard), progress)
        if answer is not None:
            return answer
        if heard:  # it ran the job, and ended before answering
            break
    return {"crash": "the compile daemon ended during the job"}


def _noting(lines: Iterable[str], heard: list[str]) -> Iterator[str]:
    """``lines``, each also appended to ``heard``."""
    for line in lines:
        heard.append(line)
        yield line


def read_answer(
    lines: Iterable[str], progress: Callable[[str, float], None] | None
) -> dict[str, Any] | None:
    """The answer among a job's ``lines`` (progress reported on the way); None at their
    end (the process answering ended first). Also the compile server's protocol."""
    for line in lines:
        answer: dict[str, Any] = json.loads(line)
        if "accepted" in answer:  # the daemon's child took the job
            continue
        if "progress" not in answer:
            return answer
        if progress is not None:
            progress(*answer["progress"])
    return None
