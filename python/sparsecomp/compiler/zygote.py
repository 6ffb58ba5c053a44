"""The compile daemon (a zygote): imports once, forks a child per job.

Started by the first client that finds none (:mod:`.daemon`, which says
where it listens and why): ``python -m sparsecomp.compiler.zygote SOCKET
[IDLE_SECONDS]`` returns once the daemon, a grandchild in a session of its
own, listens (status 0) or has died (1).
Each connection carries one job (:mod:`.jobs`), run in a child forked for it
with MLIR and sparsecomp's passes already imported; a child that dies (an
assertion in MLIR or LLVM) is reported to its client as ``{"crash": how}``
with the signal and the assertion it printed, and the daemon goes on. It
exits after :data:`IDLE_SECONDS` without a job.

The parent imports and forks only: no MLIR context (whose thread pool a fork
would break) is made before the fork.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import select
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from sparsecomp.compiler import jobs
from sparsecomp.compiler.worker_process import crash_summary

#: Seconds without a job after which the daemon exits.
IDLE_SECONDS = 600.0
#: Python modules of the dialects CPU builds create ops of (linalg's and llvm's from
#: :mod:`sparsecomp.ir.light_dialects`: upstream's linalg package runs the OpDSL,
#: 50-75 ms, and upstream's llvm module defines ~300 op classes, 12-24 ms).
_DIALECTS = ("memref", "scf", "vector", "math", "omp", "bufferization")
#: Modules only a GPU build (CUDA or its emulation) imports: the daemon imports them
#: once it listens, between jobs (:func:`_later`).
_GPU_DIALECTS = ("gpu", "nvvm")
_GPU_PASSES = ("gpu_", "emulate_gpu", "forward_returned_arguments", "horizontal_fusion",
               "lower_atomics")  # fmt: skip


def _warm() -> None:
    """Import what CPU builds import, so that each child starts with it done (the
    daemon listens after this: a cold compile waits for it)."""
    from sparsecomp.ir import light_dialects
    from sparsecomp.ir.light_dialects import linalg, llvm  # noqa: F401

    light_dialects.prefer()
    from sparsecomp.compiler import build, llvmlib  # noqa: F401

    llvmlib.enable()  # each child builds its kernel's object in process

    for name in _DIALECTS:
        with contextlib.suppress(ImportError):
            importlib.import_module(f"mlir.dialects.{name}")
    modules = ("lowering.nest", "lowering.rowemit", "lowering.convert", "compiler.aot",
               "ir.parsing", "tools.diagnostics")  # fmt: skip
    for name in modules:
        importlib.import_module(f"sparsecomp.{name}")
    for module in _pass_modules():
        if not module.startswith(_GPU_PASSES):
            importlib.import_module(f"sparsecomp.transforms.{module}")


def _pass_modules() -> list[str]:
    from sparsecomp.transforms import _REGISTRY

    return sorted({target.split(":")[0] for target in _REGISTRY.values()})


def _later() -> Iterator[str]:
    """The modules :func:`_warm` leaves to after the socket listens: GPU builds' passes
    and dialects (the CPU build a cold compile waits for needs none of them)."""
    for module in _pass_modules():
        if module.startswith(_GPU_PASSES):
            yield f"sparsecomp.transforms.{module}"
    for name in _GPU_DIALECTS:
        yield f"mlir.dialects.{name}"


def _child(conn: socket.socket, stderr: IO[bytes], others: list[socket.socket]) -> None:
    """One build, in a forked child: the job from ``conn``, the answer back; never returns.
    ``others``: the connections of the builds running beside it (the parent's)."""
    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for other in others:
            other.close()
        os.dup2(stderr.fileno(), 2)
        reader, writer = conn.makefile("r"), conn.makefile("w")

        def emit(message: dict[str, Any]) -> None:
            writer.write(json.dumps(message) + "\n")
            writer.flush()

        line = reader.readline()
        if line:
            emit({"accepted": True})  # within the client's ACCEPT_SECONDS
            emit(jobs.run(json.loads(line), emit))
    except BaseException:
        code = 70
    finally:
        os._exit(code)


@contextlib.contextmanager
def _listening(path: Path) -> Iterator[tuple[socket.socket, int]]:
    """A socket listening on ``path``, and the inode of ``path`` it made."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():  # not ours to keep: the socket's name
            shutil.rmtree(path)  # (in this user's private directory; it stopped every daemon)
        else:
            path.unlink()  # a dead daemon's socket (the lock keeps out a live one's twin)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    inode = path.stat().st_ino
    server.listen(64)
    try:
        yield server, inode
    finally:
        server.close()
        _unlink(path, inode)


def _unlink(path: Path, inode: int) -> None:
    """Remove ``path`` if it is still the socket with ``inode``, not a successor's."""
    with contextlib.suppress(OSError):
        if path.stat().st_ino == inode:
            path.unlink()


def _queued(server: socket.socket) -> bool:
    """Whether a client waits on ``server`` to be accepted."""
    return bool(select.select([server], [], [], 0)[0])


def serve(path: Path, idle: float = IDLE_SECONDS, ready: int | None = None) -> None:
    """Accept jobs on ``path`` until ``idle`` seconds pass without one; ``ready``: a
    pipe's write end, written to and closed once the socket listens."""
    _warm()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select below
    children: dict[int, tuple[socket.socket, IO[bytes]]] = {}
    with _listening(path) as (server, inode), selectors.DefaultSelector() as sel:
        sel.register(server, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        if ready is not None:
            os.write(ready, b"1")
            os.close(ready)
        last = time.monotonic()
        leaving = False
        later = list(_later())
        while True:
            # One module at a time, with no build running (on two cores the imports slowed
            # the first build, the one a cold compile waits for) and none waiting.
            # A module that fails to import is left to the build that needs it, which
            # reports the error to its client; the daemon goes on.
            while later and not children and not _queued(server):
                with contextlib.suppress(Exception):
                    importlib.import_module(later.pop(0))
            if not children and (leaving or time.monotonic() - last >= idle):
                # Idle: the socket goes first, so that a client from now on starts a
                # new daemon; one that connected before it is served before this exits
                # (closing the socket would end its connection unanswered).
                leaving = True
                _unlink(path, inode)
                if not _queued(server):
                    break
            for key, _ in sel.select(timeout=min(idle, 5.0)):
                if key.fileobj is server:
                    last = time.monotonic()  # a job, however short, is activity
                    conn, _ = server.accept()
                    stderr = tempfile.TemporaryFile()
                    pid = os.fork()
                    if pid == 0:
                        server.close()
                        _child(conn, stderr, [c for c, _ in children.values()])
                    children[pid] = (conn, stderr)
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 512)
            _reap(children)
            if children:
                last = time.monotonic()


def _reap(children: dict[int, tuple[socket.socket, IO[bytes]]]) -> None:
    """Close each ended child's connection, telling its client how a crash ended it."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn, stderr = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            stderr.seek(0)
            said = stderr.read().decode(errors="replace")
            with contextlib.suppress(OSError):
                conn.sendall((json.dumps({"crash": crash_summary(code, said)}) + "\n").encode())
        conn.close()
        stderr.close()


def detach(path: Path, idle: float) -> int:
    """Serve ``path`` in a grandchild of a new session, and return once it listens (0)
    or has died (1): the caller waits for this process, not for the daemon."""
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        os.setsid()
        code = 0
        try:
            serve(path, idle, ready=write)
            _drop_empty_log(path)
        except OSError as exc:
            code = 0 if exc.errno == errno.EADDRINUSE else 1
            traceback.print_exc()  # into the daemon's log (the socket's ".log")
        except BaseException:
            code = 1
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as ready:
        return 0 if ready.read(1) == b"1" else 1


def _drop_empty_log(path: Path) -> None:
    """After a clean exit, remove this daemon's log (the socket's ``.log``, its stderr)
    if nothing was written there: one per installation piled up in the directory. A log
    another daemon has opened since (another inode) or written to is left."""
    log = path.with_suffix(".log")
    with contextlib.suppress(OSError):
        mine = os.fstat(2)
        found = log.stat()
        if (found.st_ino, found.st_dev) == (mine.st_ino, mine.st_dev) and found.st_size == 0:
            log.unlink()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        usage = "usage: zygote.py SOCKET [IDLE_SECONDS] (sparsecomp.compiler.daemon starts it)"
        print(usage, file=sys.stderr)
        return 2
    return detach(Path(argv[0]), float(argv[1]) if len(argv) > 1 else IDLE_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
