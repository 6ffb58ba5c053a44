"""Contexts with the upstream dialects and ``sparse_iter`` loaded.

The MLIR bindings register every upstream dialect in a new ``ir.Context``.
``sparse_iter`` is a compiled dialect: ``pip install`` builds
``_generated/libsparse_iter.so`` from ``dialects/sparse_iter.td``
(``dialects/build.py``), together with its Python op classes and a table of
attribute parameter names. The library links against nothing; its MLIR and
LLVM symbols resolve against the copies the bindings loaded, which
:func:`_library` makes global first (``RTLD_NOLOAD | RTLD_GLOBAL``).
:func:`load_sparse_iter` registers the dialect in a context through the
library's C entry point, given the context's C API pointer.

In a checkout, the build's stamp must match the ``.td`` and the C++ source:
a stale library is an error telling you to reinstall, never a silent mismatch.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from mlir import ir
from mlir._mlir_libs import _mlir

from sparsecomp import forksafe
from sparsecomp.errors import ToolchainError

GENERATED = Path(__file__).with_name("_generated")
LIBRARY = "libsparse_iter.so"
PY_FILE = "_sparse_iter_ops_gen.py"
STAMP_FILE = "stamp.json"
#: The sources of the build, where a checkout has them (dialects/ beside python/).
_SOURCES = (
    Path(__file__).with_name("sparse_iter.td"),
    Path(__file__).resolve().parents[3] / "dialects" / "SparseIterDialect.cpp",
)
_PROBE_OP = "sparse_iter.set_encoding"
_RTLD_NOLOAD = 4
_CAPSULE = b"mlir.ir.Context._CAPIPtr"


def source_hash() -> str | None:
    """The hash ``dialects/build.py`` stamps, of this checkout's sources; None if installed."""
    td, cpp = (p.resolve() for p in _SOURCES)
    if not (td.exists() and cpp.exists()):
        return None
    return hashlib.sha256(td.read_bytes() + cpp.read_bytes()).hexdigest()[:20]


def generated(name: str) -> Path:
    """A built artifact; a ToolchainError if it is missing or older than its sources."""
    reinstall = "reinstall sparsecomp (pip install -e .) to rebuild the dialect"
    stamp = GENERATED / STAMP_FILE
    if not stamp.exists():
        raise ToolchainError(f"the sparse_iter dialect is not built ({stamp})", hint=reinstall)
    built = json.loads(stamp.read_text())["source"]
    current = source_hash()
    if current is not None and built != current:
        raise ToolchainError(
            "the sparse_iter dialect library is stale: dialects/sparse_iter.td or "
            "SparseIterDialect.cpp changed since it was built",
            hint=reinstall,
        )
    return GENERATED / name


@cache
def _library() -> ctypes.CDLL:
    for name in ("libMLIRPythonCAPI.so", "libLLVM.so"):  # loaded by the bindings
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL | _RTLD_NOLOAD)
    lib = ctypes.CDLL(str(generated(LIBRARY)))
    lib.sparsecompRegisterSparseIter.argtypes = [ctypes.c_void_p]
    lib.sparsecompRegisterSparseIter.restype = None
    return lib


@cache
def _emit_remark() -> Any:
    """``sparsecompEmitRemark``, called with the GIL held: the context's
    diagnostic handlers (Python callbacks) run inside it."""
    _library()
    emit = ctypes.PyDLL(str(generated(LIBRARY))).sparsecompEmitRemark
    emit.argtypes, emit.restype = [ctypes.c_void_p, ctypes.c_char_p], None
    return emit


def emit_remark(location: ir.Location, message: str) -> None:
    """A remark diagnostic at ``location`` (``file:line:col: remark: message``)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    pointer = get(location._CAPIPtr, b"mlir.ir.Location._CAPIPtr")
    _emit_remark()(pointer, message.encode())


def _context_pointer(ctx: ir.Context) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    pointer = get(ctx._CAPIPtr, _CAPSULE)
    assert pointer, "a Context capsule holds its MlirContext"
    return int(pointer)


#: Held while the generated op classes are imported: two threads making their first
#: calls at once both imported them, and the second registration of the dialect's
#: Python classes raised "Dialect namespace 'sparse_iter' is already registered".
_IMPORTING = forksafe.lock()


_OPS: list[ModuleType] = []  # the module, once imported completely


def _ops_module() -> ModuleType:
    """The generated Python op classes, imported once per process."""
    if _OPS:
        return _OPS[0]
    with _IMPORTING:
        if not _OPS:
            name = "sparsecomp.ir._sparse_iter_ops_gen"
            _OPS.append(sys.modules[name] if name in sys.modules else _import_ops(name))
        return _OPS[0]


def _import_ops(name: str) -> ModuleType:
    path = generated(PY_FILE)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import generated op classes from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if "sparsecomp.dialects" not in _mlir.globals.dialect_search_modules:
        _mlir.globals.append_dialect_search_prefix("sparsecomp.dialects")
    return module


def is_loaded(ctx: ir.Context) -> bool:
    """Whether ``sparse_iter`` is already registered in ``ctx``."""
    return ctx.is_registered_operation(_PROBE_OP)


def load_sparse_iter(ctx: ir.Context) -> None:
    """Register and load ``sparse_iter`` in ``ctx``; a no-op when it is there already."""
    if is_loaded(ctx):
        return
    _library().sparsecompRegisterSparseIter(_context_pointer(ctx))
    _ops_module()


def make_context(*, multithreading: bool = True) -> ir.Context:
    """A new context with every upstream dialect and ``sparse_iter`` loaded."""
    ctx = ir.Context()
    ctx.enable_multithreading(multithreading)
    load_sparse_iter(ctx)
    return ctx


def ops() -> ModuleType:
    """The generated op classes (``SetEncodingOp``, ``set_encoding``, ...)."""
    return _ops_module()
