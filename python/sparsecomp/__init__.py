"""sparsecomp: an MLIR-based sparse tensor compiler.

``sparsecomp.kernel`` decorates a kernel written in Python
(:mod:`sparsecomp.script`). ``sparsecomp.formats`` and
``sparsecomp.runtime`` import without MLIR; the
compiler parts (``sparsecomp.ir``, ``sparsecomp.transforms``,
``sparsecomp.tools``) need the pinned MLIR wheels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparsecomp._version import __version__
from sparsecomp.errors import SparsecompError
from sparsecomp.sparsify import sparsify

if TYPE_CHECKING:
    from pathlib import Path

    from sparsecomp.runtime import Executable

__all__ = ["SparsecompError", "__version__", "compile", "kernel", "load", "sparsify"]


def compile(source: Any, target: Any = "host", **options: Any) -> Executable:
    """Compile MLIR to an executable; see :func:`sparsecomp.compiler.driver.compile`."""
    from sparsecomp.compiler.driver import compile as _compile

    return _compile(source, target, **options)


#: Subpackages ``sparsecomp.<name>`` reaches without an import of their own (as
#: ``sparsecomp.targets.cpu.detect_host()`` in an argument of the first compile).
_SUBPACKAGES = frozenset({
    "compiler", "dask", "formats", "ir", "lowering", "runtime", "script", "targets",
    "tools", "torch", "transforms",
})  # fmt: skip


def __getattr__(name: str) -> Any:
    """``sparsecomp.kernel`` (:func:`sparsecomp.script.kernel.kernel`) and the
    subpackages, imported on first use: ``import sparsecomp`` imports neither numpy
    nor MLIR."""
    if name == "kernel":
        from sparsecomp.script.kernel import kernel

        return kernel
    if name in _SUBPACKAGES:
        import importlib

        return importlib.import_module(f"sparsecomp.{name}")
    raise AttributeError(f"module 'sparsecomp' has no attribute '{name}'")


def load(directory: str | Path) -> Executable:
    """Load a compiled kernel directory; see :func:`sparsecomp.runtime.load` (no MLIR import)."""
    from sparsecomp.runtime import load as _load

    return _load(directory)
