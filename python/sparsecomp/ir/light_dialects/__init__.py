"""Dialect modules the compile processes give MLIR's bindings before the upstream ones.

The bindings find the Python module of a dialect by its namespace, trying each
search prefix in turn, the first time they wrap one of its ops (any walk over
a linalg body does). Upstream's ``mlir.dialects.linalg`` runs the OpDSL's
named-op definitions when imported, 50-75 ms on the 2-core EPYC, of which a
build uses nothing: ``linalg`` here is the generated op and enum classes
alone. :func:`prefer` puts this package first; only the compile daemon and
the compile server call it (a user's process keeps the bindings' order, and
importing ``mlir.dialects.linalg`` anywhere still gives the whole package).
"""

from __future__ import annotations

from mlir._mlir_libs import _mlir

PREFIX = "sparsecomp.ir.light_dialects"


def prefer() -> None:
    """Search this package before the bindings' own dialect modules (once)."""
    found = list(_mlir.globals.dialect_search_modules)
    if found[:1] != [PREFIX]:
        _mlir.globals.dialect_search_modules = [PREFIX, *(m for m in found if m != PREFIX)]
