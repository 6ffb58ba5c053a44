"""Host-side sparse tensors: layouts, packing, n:m, sparsifiers (no MLIR import).

``SparseTensor.from_scipy(m, "bsr:16x16")`` packs a scipy.sparse matrix into a
layout; ``.to_scipy()`` and ``.to_dense()`` unpack it; ``choose(m, op="spmm")``
picks the layout predicted fastest for an op on this machine. Layouts are given as
short names (see :func:`parse_layout`) or :class:`Layout` /
:class:`Composable` objects, which map 1:1 to ``#sparse_iter`` attributes.
"""

from __future__ import annotations

from sparsecomp.errors import FormatError
from sparsecomp.formats.choice import Choice, choose
from sparsecomp.formats.composable import Composable, Part
from sparsecomp.formats.compose import assign_parts
from sparsecomp.formats.dimmap import DimMap, LevelExpr
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.levels import Level
from sparsecomp.formats.names import AnyLayout, layout_from_attr, parse_layout
from sparsecomp.formats.sizes import storage_bytes
from sparsecomp.formats.sparsifiers import Sparsifier
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.formats.validate import VALUE_DTYPES

__all__ = [
    "VALUE_DTYPES",
    "AnyLayout",
    "Choice",
    "Composable",
    "DimMap",
    "FormatError",
    "Layout",
    "Level",
    "LevelExpr",
    "Part",
    "SparseTensor",
    "Sparsifier",
    "assign_parts",
    "choose",
    "layout_from_attr",
    "parse_layout",
    "storage_bytes",
]
