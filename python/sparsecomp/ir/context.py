"""Contexts with the upstream dialects and ``sparse_iter`` loaded exactly once.

The MLIR bindings register every upstream dialect in a new ``ir.Context``.
``sparse_iter`` is registered at run time through IRDL, and loading the same
IRDL dialect twice into one context aborts the process, so all loading goes
through :func:`load_sparse_iter`, which asks the context itself whether the
dialect is already there.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from mlir import ir
from mlir._mlir_libs import _mlir
from mlir.dialects import irdl

from sparsecomp.ir import odsgen

_PROBE_OP = "sparse_iter.set_encoding"


def _ops_module() -> ModuleType:
    """The generated Python op classes, imported once per process."""
    name = "sparsecomp.ir._sparse_iter_ops_gen"
    if name in sys.modules:
        return sys.modules[name]
    path = odsgen.ensure_generated() / odsgen.PY_FILE
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
    """Register ``sparse_iter`` in ``ctx``; a no-op when it is there already."""
    if is_loaded(ctx):
        return
    irdl_text = (odsgen.ensure_generated() / odsgen.IRDL_FILE).read_text()
    with ctx, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(irdl_text))
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
