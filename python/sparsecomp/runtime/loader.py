"""Loading kernel libraries so that no other process can pull them from under us.

``dlopen`` maps a library from its file and keeps reading that file for as
long as the process lives: the dynamic loader walks the symbol tables of
every library in the global scope on each later ``dlopen``, and pages
dropped under memory pressure are read back from the file. A file that
another process rewrites in place (``shutil.copy2`` onto a saved kernel,
``cp``) therefore crashed this process inside ``dlopen`` or in a call: a
segment past the new end of the file is SIGBUS, other bytes SIGSEGV. Two
rules make loading safe whatever else runs on the machine:

- **Kernel libraries are loaded from a private copy** of the bytes that were
  checked: read once, checked against the manifest's ``library_sha256``
  (a manifest and a library from two different saves are refused, never
  called with the wrong ABI) and against truncation (:func:`cut_short`),
  written to this process's own folder, loaded, and unlinked. The mapping
  then belongs to a file nobody else can name. The same bytes loaded again
  reuse the first copy.
- **A runtime library is loaded once per process by name** (:func:`runtime`):
  the first ``libomp.so`` loaded serves every kernel after it, so a process
  never holds two OpenMP runtimes (one from a saved directory, one
  installed), and a library in the global scope is never a file in a
  directory that others write to later.

Writers, for their part, never rewrite a file in place: :func:`write_files`
writes a temporary file beside each destination and renames it over the old
name, so a process that mapped the old file keeps the old bytes.

Imports no MLIR.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

from sparsecomp import forksafe
from sparsecomp.errors import SparsecompError
from sparsecomp.runtime.libs import bindings_core

#: (sha256 of the bytes) -> the library loaded from them
_KERNELS: dict[str, ctypes.CDLL] = {}
#: runtime library name ("omp") -> (the file it was loaded from, the library)
_RUNTIMES: dict[str, tuple[Path, ctypes.CDLL]] = {}
_LOCK = forksafe.lock()
_PRIVATE: Path | None = None


def digest(data: bytes) -> str:
    """The ``library_sha256`` of a library's bytes (``manifest.json``)."""
    return hashlib.sha256(data).hexdigest()


#: The manifest's own digest: sha256 of its other keys, as canonical JSON.
MANIFEST_DIGEST = "manifest_sha256"


def manifest_text(manifest: dict[str, Any]) -> str:
    """``manifest`` as the text of a ``manifest.json``, with its own digest: a manifest
    damaged or edited since (a result's dtype changed: the kernel's results read as
    another type) is then refused at load."""
    body = {k: v for k, v in manifest.items() if k != MANIFEST_DIGEST}
    return json.dumps({**body, MANIFEST_DIGEST: _body_digest(body)}, indent=1)


def _body_digest(body: dict[str, Any]) -> str:
    """sha256 of a manifest's keys but its digest, as canonical JSON."""
    return digest(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def manifest_damage(manifest: dict[str, Any]) -> str | None:
    """Why ``manifest`` is not what was written (its digest does not match), or None
    (it matches, or it has none: written before digests were)."""
    recorded = manifest.get(MANIFEST_DIGEST)
    if recorded is None:
        return None
    body = {k: v for k, v in manifest.items() if k != MANIFEST_DIGEST}
    if _body_digest(body) != recorded:
        return "it was changed or damaged since it was written (its digest does not match)"
    return None


def _whole(path: Path) -> bytes:
    """The bytes of library ``path``; an error where it cannot be read or is cut short."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SparsecompError(f"cannot load {path}: {err.strerror}") from None
    if (short := cut_short(data)) is not None:
        raise SparsecompError(f"cannot load {path}: {short}")
    return data


def check_runtime_copy(path: Path, expected: str | None) -> None:
    """Refuse a runtime library saved beside a kernel that is cut short or (where the
    manifest recorded its digest) not the bytes saved: ``dlopen`` of a damaged copy
    killed the process (SIGBUS, SIGSEGV)."""
    data = _whole(path)
    if expected is not None and digest(data) != expected:
        raise SparsecompError(
            f"cannot load {path}: it is not the library that was saved with the kernel "
            "(damaged, or replaced)",
            hint="save the executable again, or delete the copy to use the installed one",
        )


def kernel(path: Path, expected: str | None) -> ctypes.CDLL:
    """The kernel library at ``path``, loaded from a private copy of its bytes.

    ``expected``: the manifest's ``library_sha256`` (None: a manifest written
    before it was recorded, not checked). Raises :class:`SparsecompError` when
    the bytes are not those, and for a file that cannot be read or loaded.
    """
    data = _whole(path)
    found = digest(data)
    if expected is not None and found != expected:
        raise SparsecompError(
            f"cannot load {path}: it is not the library its manifest.json describes "
            "(another process is saving into that directory, or the files were mixed)",
            hint="load it again once the save has finished",
        )
    with _LOCK:
        library = _KERNELS.get(found)
        if library is not None:
            return library
        copy: Path | None = None
        try:
            copy = _private_folder() / f"{found[:32]}-{path.name}"
            copy.write_bytes(data)
            library = ctypes.CDLL(str(copy), mode=ctypes.RTLD_LOCAL)
        except OSError as err:  # no room for the copy, or dlopen refused it
            raise SparsecompError(f"cannot load {path}: {err}") from None
        finally:
            if copy is not None:
                copy.unlink(missing_ok=True)  # the mapping keeps the bytes
        _raise_fatal_errors(library)
        _KERNELS[found] = library
        return library


#: The global of a library that holds its handler of failed run-time checks
#: (``sparsecomp.ir.fatal.HANDLER``).
FATAL_HANDLER = "__sparsecomp_fatal_handler"


def _raise_fatal_errors(library: ctypes.CDLL) -> None:
    """Point ``library``'s handler of failed run-time checks at the C call path's, so
    that such a check raises :class:`~sparsecomp.errors.KernelError` in the calling
    thread instead of ending the process (``_fastcall.c``); without the extension,
    or in a library that has no checks, nothing changes."""
    try:
        from sparsecomp.runtime.fastcall import extension
    except ImportError:
        return
    fastcall = extension()
    if fastcall is None:
        return
    try:
        slot = ctypes.c_void_p.in_dll(library, FATAL_HANDLER)
    except ValueError:  # no run-time check in it
        return
    slot.value = fastcall.FATAL_HANDLER


#: Runtime libraries loaded into the global scope. MLIR's runner utilities are not:
#: libmlir_c_runner_utils.so needs libMLIR.so, a second copy of MLIR's core beside
#: the bindings' own, and in the global scope its symbols took precedence when the
#: sparse_iter dialect library was loaded later ("LLVM ERROR: Trying to register
#: different dialects for the same namespace: builtin", an abort). A kernel finds a
#: library it needs by its soname whatever the scope it was loaded into.
GLOBAL = frozenset({"omp"})
#: Runtime libraries that bring libMLIR.so: the bindings' core is loaded before them
#: (without importing the bindings) where the bindings are installed. The two copies
#: share MLIR's template statics (unique symbols, bound to the first copy loaded);
#: with libMLIR.so first, the bindings' first context asserted in the transform
#: dialect's registration (an abort) whatever the scope.
AFTER_BINDINGS = frozenset({"c_runner_utils", "runner_utils"})


def runtime(name: str, candidates: list[Path], expected: dict[str, str] | None = None) -> Path:
    """Load runtime library ``name`` from the first of ``candidates`` that exists,
    unless one of that name is loaded already; the file in use (RTLD_GLOBAL for
    :data:`GLOBAL`, else RTLD_LOCAL). ``expected``: file name -> sha256 of the copies
    saved beside a kernel (:func:`check_runtime_copy`)."""
    with _LOCK:
        if name in _RUNTIMES:
            return _RUNTIMES[name][0]
        path = next((c for c in candidates if c.is_file()), candidates[-1])
        if expected is not None and path is not candidates[-1]:  # a saved copy
            check_runtime_copy(path, expected.get(path.name))
        mode = ctypes.RTLD_GLOBAL if name in GLOBAL else ctypes.RTLD_LOCAL
        try:
            if name in AFTER_BINDINGS and (core := bindings_core()) is not None:
                ctypes.CDLL(str(core), mode=ctypes.RTLD_LOCAL)
            library = ctypes.CDLL(str(path), mode=mode)
        except OSError as err:
            raise SparsecompError(f"cannot load {path}: {err}") from None
        _RUNTIMES[name] = (path, library)
        return path


def write_files(copies: list[tuple[Path, Path]]) -> None:
    """Copy each ``(source, destination)``, in order, through temporary files renamed
    over the destinations once every source has been read: a process which
    mapped an old destination keeps reading the old bytes, and a source that
    cannot be read (removed meanwhile) leaves the destinations as they were
    (the ``OSError`` is raised)."""
    staged: list[tuple[str, Path]] = []
    try:
        for source, destination in copies:
            fd, tmp = tempfile.mkstemp(prefix=f".{destination.name}.", dir=destination.parent)
            os.close(fd)
            staged.append((tmp, destination))
            shutil.copy2(source, tmp)
        for tmp, destination in staged:
            os.replace(tmp, destination)
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def _private_folder() -> Path:
    global _PRIVATE
    if _PRIVATE is None or not _PRIVATE.is_dir():
        _PRIVATE = Path(tempfile.mkdtemp(prefix="sparsecomp-libs-"))
        atexit.register(shutil.rmtree, _PRIVATE, True)
    return _PRIVATE


_PT_LOAD = 1


def cut_short(data: bytes) -> str | None:
    """Why ELF64 shared object ``data`` is incomplete, or None.

    The dynamic loader maps each loadable segment from the file; one that a
    truncated file (a copy cut short, a full disk) ends before is mapped past
    the file's end, and the first touch of it kills the process (SIGBUS). Other
    files (not ELF64, garbage) are left to ``dlopen``, which refuses them cleanly.
    """
    size = len(data)
    if size < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    order = "<" if data[5] == 1 else ">"
    (phoff,) = struct.unpack_from(order + "Q", data, 0x20)
    phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    if phentsize < 56 or phoff + phentsize * phnum > size:
        return f"it is cut short ({size} bytes, its program headers end past that)"
    for k in range(phnum):
        at = phoff + k * phentsize
        (kind,) = struct.unpack_from(order + "I", data, at)
        (offset,) = struct.unpack_from(order + "Q", data, at + 8)
        (filesz,) = struct.unpack_from(order + "Q", data, at + 32)
        if kind == _PT_LOAD and offset + filesz > size:
            return f"it is cut short ({size} bytes, a segment ends at byte {offset + filesz})"
    return None
