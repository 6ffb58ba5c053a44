"""sparsecomp: an MLIR-based sparse tensor compiler.

``sparsecomp.formats`` and ``sparsecomp.runtime`` import without MLIR; the
compiler parts (``sparsecomp.ir``, ``sparsecomp.transforms``,
``sparsecomp.tools``) need the pinned MLIR wheels.
"""

from __future__ import annotations

from sparsecomp.errors import SparsecompError
from sparsecomp.sparsify import sparsify

__version__ = "0.1.0"
__all__ = ["SparsecompError", "__version__", "sparsify"]
