"""Host-side sparse tensors: layouts, packing, n:m, sparsifiers (no MLIR import).

``SparseTensor.from_scipy(m, "bsr:16x16")`` packs a scipy.sparse matrix into a
layout; ``.to_scipy()`` and ``.to_dense()`` unpack it; ``choose(m, op="spmm")``
picks the layout predicted fastest for an op on this machine. Layouts are given as
short names (see :func:`parse_layout`) or :class:`Layout` /
:class:`Composable` objects, which map 1:1 to ``#sparse_iter`` attributes.

The names below are imported from their modules when first used (PEP 562): a
process that only needs a submodule (the compile client's target text,
``formats.attrtext``) does not import numpy with the package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sparsecomp.errors import FormatError

if TYPE_CHECKING:
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

#: Each public name and the submodule that defines it.
_HOME = {
    "Choice": "choice", "choose": "choice",
    "Composable": "composable", "Part": "composable",
    "assign_parts": "compose",
    "DimMap": "dimmap", "LevelExpr": "dimmap",
    "Layout": "layout",
    "Level": "levels",
    "AnyLayout": "names", "layout_from_attr": "names", "parse_layout": "names",
    "storage_bytes": "sizes",
    "Sparsifier": "sparsifiers",
    "SparseTensor": "tensor",
    "VALUE_DTYPES": "validate",
}  # fmt: skip

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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
