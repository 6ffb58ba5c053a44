"""Executables shipped to Dask workers: saved once, loaded once per worker.

A :class:`Payload` holds the files :meth:`Executable.save` writes (the
library, its manifest, the runtime libraries it needs) and their digest. It
is a persisted task of the cluster (a literal in its graph, so that Dask can
send it again to a worker that replaces a lost one);
a worker loads it with :func:`sparsecomp.load` (no MLIR, no C compiler) into a
directory of its own the first time a task needs it, and keeps the
executable for the next tasks (:func:`executable`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


@dataclass(frozen=True)
class Payload:
    """An executable's saved files (name -> bytes) and their digest."""

    digest: str
    files: tuple[tuple[str, bytes], ...]

    @classmethod
    def of(cls, exe: Any) -> Payload:
        """``exe``'s files, as ``Executable.save`` writes them."""
        with tempfile.TemporaryDirectory(prefix="sparsecomp-ship-") as tmp:
            exe.save(tmp)
            files = tuple(sorted((p.name, p.read_bytes()) for p in Path(tmp).iterdir()))
        h = hashlib.sha256()
        for name, data in files:
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        return cls(h.hexdigest()[:20], files)

    @property
    def nbytes(self) -> int:
        return sum(len(d) for _, d in self.files)


def executable(payload: Payload) -> Any:
    """The executable of ``payload`` in this process: loaded at the first call, then kept."""
    with _LOCK:
        found = _LOADED.get(payload.digest)
        if found is None:
            from sparsecomp.runtime import load

            root = Path(tempfile.gettempdir()) / f"sparsecomp-worker-{os.getpid()}"
            directory = root / payload.digest
            directory.mkdir(parents=True, exist_ok=True)
            for name, data in payload.files:
                (directory / name).write_bytes(data)
            found = _LOADED[payload.digest] = load(directory)
        return found
