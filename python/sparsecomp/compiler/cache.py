"""The on-disk compile cache (Triton-style).

A compiled kernel lives in ``$SPARSECOMP_CACHE_DIR/kernels/<key>/``: the
library, ``manifest.json`` and the IR of every stage. The key hashes
everything that changes the output: the source text, the target, the
compile options, the sparsecomp sources (package files, pipelines, the
dialect ``.td``) and the MLIR wheel version. A directory is built under a
temporary name and renamed into place, so readers never see half a kernel
and concurrent compiles of one key both succeed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

from sparsecomp import knobs

_PACKAGE = Path(__file__).resolve().parents[1]
MANIFEST = "manifest.json"


@functools.cache
def package_hash() -> str:
    """A hash of sparsecomp's own sources (code, pipelines, dialect)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in (".py", ".txt", ".td") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def mlir_version() -> str:
    return importlib.metadata.version("xtc-mlir-python-bindings")


def cache_key(source: str, target: str, options: dict[str, object]) -> str:
    digest = hashlib.sha256()
    for part in (source, target, repr(sorted(options.items())), package_hash(), mlir_version()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def kernel_dir(key: str) -> Path:
    return knobs.cache_dir() / "kernels" / key


def lookup(key: str) -> Path | None:
    """The cached kernel directory for ``key`` if complete."""
    path = kernel_dir(key)
    return path if (path / MANIFEST).is_file() else None


def new_build_dir() -> Path:
    """A fresh private directory to build a kernel in, on the cache's file system."""
    root = knobs.cache_dir() / "kernels"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".build-", dir=root))


def publish(build: Path, key: str) -> Path:
    """Move a finished build into place atomically; the first finished build wins."""
    final = kernel_dir(key)
    try:
        os.replace(build, final)
    except OSError:  # another process published the same key first
        shutil.rmtree(build, ignore_errors=True)
    return final
