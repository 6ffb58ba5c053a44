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

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from sparsecomp import knobs
from sparsecomp.errors import SparsecompError

_PACKAGE = Path(__file__).resolve().parents[1]
MANIFEST = "manifest.json"


@functools.cache
def package_hash() -> str:
    """A hash of sparsecomp's own sources (code, pipelines, dialect, the CUDA shim)."""
    digest = hashlib.sha256()
    for path in sorted(_sources()):
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _sources() -> list[Path]:
    """The package's source files, through symbolic links (``pipelines/`` is one in a
    checkout, which ``Path.rglob`` does not follow)."""
    found = []
    for root, dirs, files in os.walk(_PACKAGE, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [Path(root) / f for f in files if Path(f).suffix in (".py", ".txt", ".td", ".c")]
    return found


#: The distribution whose version is part of every cache key.
MLIR_DISTRIBUTION = "xtc-mlir-python-bindings"


@functools.cache
def mlir_version() -> str:
    """The installed MLIR bindings' version: from the name of their ``.dist-info``
    directory on ``sys.path``, which a wheel's install writes, else through
    ``importlib.metadata`` (whose import, 25-30 ms, a cached call paid in every new
    process)."""
    prefix = MLIR_DISTRIBUTION.replace("-", "_") + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info"):
                return name[len(prefix) : -len(".dist-info")]
    import importlib.metadata

    return importlib.metadata.version(MLIR_DISTRIBUTION)


def cache_key(source: str, target: str, options: dict[str, object]) -> str:
    digest = hashlib.sha256()
    for part in (source, target, repr(sorted(options.items())), package_hash(), mlir_version()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def kernel_dir(key: str) -> Path:
    return knobs.cache_dir() / "kernels" / key


def variant_digest(parts: Iterable[object]) -> str:
    """The name of a variant's memo: a digest of how it derives from its program
    (``parts``: the program's text, target, options and the variant's request) and of
    this installation (sparsecomp's sources and MLIR's version derive it)."""
    digest = hashlib.sha256()
    for part in (*map(repr, parts), package_hash(), mlir_version()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _variant_path(digest: str) -> Path:
    return knobs.cache_dir() / "kernels" / ".variants" / f"{digest}.json"


def read_variant(digest: str) -> tuple[str, str] | None:
    """The kernel key and program text a variant's memo records, or None (none yet, or
    unreadable: the variant is derived again)."""
    try:
        memo = json.loads(_variant_path(digest).read_text())
        key, text = memo["key"], memo["text"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (key, text) if isinstance(key, str) and isinstance(text, str) else None


def record_variant(digest: str, key: str, text: str) -> None:
    """Remember that the variant ``digest`` is the program ``text``, cached as ``key``:
    a later process loads it without deriving the text (which parses the program
    with MLIR: 0.1-0.2 s of imports in a process that had none). Best effort."""
    path = _variant_path(digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".tmp", prefix=".variant-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "text": text}, f)
        os.replace(tmp, path)
    except OSError:
        return


def lookup(key: str) -> Path | None:
    """The cached kernel directory for ``key`` if complete."""
    path = kernel_dir(key)
    return path if (path / MANIFEST).is_file() else None


def intact(path: Path) -> bool:
    """Whether kernel directory ``path`` is whole: a manifest and the library it
    describes (``library_sha256``, where recorded), not cut short, and so is each
    of its ``parts``."""
    from sparsecomp.runtime.loader import cut_short, digest, manifest_damage

    try:
        manifest = json.loads((path / MANIFEST).read_text())
        data = (path / manifest["library"]).read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if manifest_damage(manifest) is not None:
        return False
    expected = manifest.get("library_sha256")
    if (expected is not None and digest(data) != expected) or cut_short(data) is not None:
        return False
    parts = manifest.get("parts", [])  # a program built for several devices
    try:
        return all(intact(path / part["directory"]) for part in parts)
    except (KeyError, TypeError):
        return False


def new_build_dir() -> Path:
    """A fresh private directory to build a kernel in, on the cache's file system.

    The caller removes it when the build fails. Build directories older
    than :data:`STALE_BUILD_S` belong to processes that were killed
    mid-build and are removed here.
    """
    root = knobs.cache_dir() / "kernels"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_stale(root.glob(".build-*"), STALE_BUILD_S)
        return Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    except OSError as exc:
        raise unusable(exc) from None


def unusable(exc: OSError) -> SparsecompError:
    """The error for a cache directory this process cannot write (a file of that name,
    a read-only or full file system, no permission)."""
    where = exc.filename or knobs.cache_dir()
    return SparsecompError(
        f"the compile cache cannot be written at {where}: {exc.strerror or exc}",
        hint="set SPARSECOMP_CACHE_DIR to a writable directory with room",
    )


#: A build directory untouched for this long is an orphan (no build takes a day).
STALE_BUILD_S = 24 * 3600
#: Reproducers kept in the cache's ``reproducers/`` folder (the newest ones).
KEEP_REPRODUCERS = 8


def save_reproducer(text: str, pipeline: str, folder: Path | None) -> Path:
    """Write a failing stage's input; the file a reproducing command can name.

    Into ``folder`` (``SPARSECOMP_REPRODUCER_DIR``) when set, a new file per
    failure, the user's to keep; else into ``$SPARSECOMP_CACHE_DIR/reproducers/``, named
    by content (the same failure rewrites the same file) and limited to
    the newest :data:`KEEP_REPRODUCERS` files, so failures never pile up
    in the temporary directory.
    """
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(suffix=".mlir", prefix="sparsecomp-repro-", dir=folder)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return Path(name)
    folder = knobs.cache_dir() / "reproducers"
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(f"{pipeline}\0{text}".encode()).hexdigest()[:16]
    path = folder / f"repro-{digest}.mlir"
    fd, tmp = tempfile.mkstemp(suffix=".tmp", prefix=".repro-", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    _keep_newest(sorted(folder.glob("repro-*.mlir"), key=_mtime), KEEP_REPRODUCERS, path)
    return path


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another process
        return 0.0


def _keep_newest(paths: list[Path], keep: int, current: Path) -> None:
    """Remove all but the ``keep`` newest of ``paths`` (oldest first), never ``current``."""
    for path in paths[: max(len(paths) - keep, 0)]:
        if path != current:
            path.unlink(missing_ok=True)


def _remove_stale(paths: Iterable[Path], age_s: float) -> None:
    now = time.time()
    for path in paths:
        mtime = _mtime(path)
        if mtime and now - mtime > age_s:
            shutil.rmtree(path, ignore_errors=True)


def publish(build: Path, key: str) -> Path:
    """Move a finished build into place atomically; the first finished build wins.

    Where another process is removing the key's directory meanwhile (a cache
    cleaned by hand, an eviction), what is left of it is removed and the build
    moved in; if that keeps failing, the build stays where it is and is returned.
    """
    final = kernel_dir(key)
    for _ in range(3):
        try:
            os.replace(build, final)
            return final
        except OSError:  # the key's directory exists: another process published it first
            if lookup(key) is not None:
                shutil.rmtree(build, ignore_errors=True)
                return final
            shutil.rmtree(final, ignore_errors=True)  # a directory half removed
    return build


@contextlib.contextmanager
def building(key: str) -> Iterator[None]:
    """Hold the build lock of ``key`` (``kernels/.locks/<key>``, ``flock``): processes
    compiling the same program at once (pytest-xdist workers, Dask workers) build
    it once; the others wait, then find it in the cache. The lock is the
    kernel's: a process that dies holding it releases it."""
    folder = knobs.cache_dir() / "kernels" / ".locks"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / key, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only or odd file system: build without the lock
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def record_build_time(build: Path, seconds: float) -> None:
    """Note how long the build took in its ``manifest.json`` (``build_seconds``; shown
    by ``sparsecomp-compile -v`` when the kernel later comes from the cache)."""
    from sparsecomp.runtime.loader import manifest_text

    path = build / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["build_seconds"] = round(seconds, 4)
    path.write_text(manifest_text(manifest))
