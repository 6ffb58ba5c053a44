"""Find ``#sparse_iter`` attributes on MLIR objects.

The dialect's attributes have no Python accessors; their printed text is
read by their host-side twins (:class:`~sparsecomp.formats.Layout`,
:class:`~sparsecomp.targets.resolve.Encoding`, the targets,
:class:`~sparsecomp.formats.Sparsifier`), which also write it
(``attr_text()``), so Python reads and builds them through those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlir import ir

if TYPE_CHECKING:
    from sparsecomp.formats.names import AnyLayout

PREFIX = "#sparse_iter."
__all__ = ["encoding_of", "layout_of", "mnemonic"]


def mnemonic(attr: ir.Attribute) -> str | None:
    """``"layout"`` for ``#sparse_iter.layout<...>``; ``None`` for other attributes."""
    text = str(attr)
    if not text.startswith(PREFIX):
        return None
    return text[len(PREFIX) :].split("<", 1)[0]


def encoding_of(ty: ir.Type) -> ir.Attribute | None:
    """The ``#sparse_iter`` encoding of a ranked tensor type, if it has one."""
    if not isinstance(ty, ir.RankedTensorType):
        return None
    enc = ty.encoding
    return enc if enc is not None and mnemonic(enc) is not None else None


def layout_of(ty: ir.Type) -> AnyLayout | None:
    """The host layout (:class:`Layout` or :class:`Composable`) a tensor type stores.

    None when the type has no ``#sparse_iter.layout``/``composable`` encoding;
    :class:`~sparsecomp.errors.FormatError` when the attribute is invalid.
    """
    from sparsecomp.formats.names import layout_from_attr

    enc = encoding_of(ty)
    if enc is None or mnemonic(enc) not in ("layout", "composable"):
        return None
    return layout_from_attr(str(enc))
