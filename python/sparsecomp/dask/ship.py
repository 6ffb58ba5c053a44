"""Executables shipped to Dask workers: saved once, loaded once per worker.

A :class:`Payload` holds the files a worker needs to load an executable (the
library, its manifest, the runtime libraries it needs; not the stage IR) and
their digest. :func:`install` registers it with the cluster as a worker
plugin: Dask sends it to every worker once, and to every worker that joins
later (one that replaces a dead one included). Each worker writes the files to
a directory of its own and loads them with :func:`sparsecomp.load` (no MLIR,
no C compiler); tasks then name the executable by its digest only
(:func:`executable`), so nothing but the operands moves per call.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparsecomp.errors import SparsecompError

_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
#: what a worker does not need to run an executable: its stage IR
_NOT_SHIPPED = (".mlir", ".ll")


@dataclass(frozen=True)
class Payload:
    """An executable's files (name -> bytes) and their digest."""

    digest: str
    files: tuple[tuple[str, bytes], ...]

    @classmethod
    def of(cls, exe: Any) -> Payload:
        """``exe``'s files, as ``Executable.save`` writes them, less the stage IR."""
        with tempfile.TemporaryDirectory(prefix="sparsecomp-ship-") as tmp:
            exe.save(tmp)
            files = tuple(
                sorted(
                    (p.name, p.read_bytes())
                    for p in Path(tmp).iterdir()
                    if not p.name.endswith(_NOT_SHIPPED)
                )
            )
        h = hashlib.sha256()
        for name, data in files:
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return cls(h.hexdigest()[:20], files)

    def load(self) -> Any:
        """Write the files to this process's directory for them and load them (once)."""
        with _LOCK:
            found = _LOADED.get(self.digest)
            if found is None:
                from sparsecomp.runtime import load

                directory = _own_directory() / self.digest
                directory.mkdir(parents=True, exist_ok=True)
                for name, data in self.files:
                    (directory / name).write_bytes(data)
                found = _LOADED[self.digest] = load(directory)
            return found


_PREFIX = "sparsecomp-worker-"
_OWN: Path | None = None


def _own_directory() -> Path:
    """This process's directory for shipped executables, removed when it exits; the
    first call also removes those of this user's processes that died (a killed worker
    cannot remove its own: they piled up in ``/tmp``, 1-10 MB each)."""
    global _OWN
    if _OWN is None or _OWN.name != f"{_PREFIX}{os.getpid()}":  # a forked child: its own
        _OWN = Path(tempfile.gettempdir()) / f"{_PREFIX}{os.getpid()}"
        _sweep(_OWN.parent)
        atexit.register(shutil.rmtree, _OWN, True)
    return _OWN


def _sweep(tmp: Path) -> None:
    """Remove the directories of dead processes of this user."""
    for path in tmp.glob(f"{_PREFIX}*"):
        pid = path.name[len(_PREFIX) :]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if path.stat().st_uid == os.getuid():
                shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


class ExecutablePlugin:
    """A ``distributed`` worker plugin loading a :class:`Payload` on each worker."""

    idempotent = True  # registering it again (same name) changes nothing

    def __init__(self, payload: Payload) -> None:
        self.payload = payload
        self.name = f"sparsecomp-{payload.digest}"

    def setup(self, worker: Any) -> None:
        self.payload.load()


def install(payload: Payload, client: Any) -> None:
    """Register ``payload`` with ``client``'s cluster (each worker loads it once)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    plugin = type("SparsecompExecutable", (ExecutablePlugin, WorkerPlugin), {})(payload)
    client.register_plugin(plugin, name=plugin.name)


def executable(digest: str) -> Any:
    """The executable ``digest`` names, loaded on this worker by its plugin."""
    found = _LOADED.get(digest)
    if found is None:
        raise SparsecompError(
            f"executable {digest} is not installed on this worker",
            hint="run it through sparsecomp.dask.map, which installs it on every worker",
        )
    return found
