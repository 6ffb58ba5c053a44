"""Read and build ``#sparse_iter`` attributes from Python.

The dialect's attributes have no Python accessors, so parameters are
recovered from the attribute's printed form ``#sparse_iter.name<p0, p1, ...>``:
the text between the outer brackets is split at top-level commas and each
piece is parsed back as a builtin attribute. Parameter names come from the
``.td`` through ``attr_params.json``, built with the dialect library.

Attributes with the readable syntax (:data:`READABLE`: bare identifiers and
``key = value`` parameters, ``#sparse_iter.cpu<x86_64, features = [avx2],
...>``) are not positional: read and write them through their host classes
(:func:`sparsecomp.targets.target_from_attr`, ``attr_text()``).
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING

from mlir import ir

from sparsecomp.formats.attrtext import split_top_level
from sparsecomp.ir import context

if TYPE_CHECKING:
    from sparsecomp.formats.names import AnyLayout

PREFIX = "#sparse_iter."
#: Attributes printed with named parameters, which params() and build() do not take.
READABLE = frozenset({"cpu", "cuda"})
__all__ = ["build", "encoding_of", "mnemonic", "param_names", "params", "split_top_level"]


@cache
def param_names() -> dict[str, list[str]]:
    """``{mnemonic: [parameter names]}`` of every dialect attribute."""
    path = context.generated(context.PARAMS_FILE)
    return json.loads(path.read_text())


def mnemonic(attr: ir.Attribute) -> str | None:
    """``"layout"`` for ``#sparse_iter.layout<...>``; ``None`` for other attributes."""
    text = str(attr)
    if not text.startswith(PREFIX):
        return None
    return text[len(PREFIX) :].split("<", 1)[0]


def params(attr: ir.Attribute) -> dict[str, ir.Attribute]:
    """Parameters of a ``#sparse_iter`` attribute by name, in declaration order."""
    name = mnemonic(attr)
    if name is None:
        raise ValueError(f"not a sparse_iter attribute: {attr}")
    _positional(name)
    text = str(attr)
    body = text[text.index("<") + 1 : -1]
    values = [ir.Attribute.parse(p, attr.context) for p in split_top_level(body)]
    return dict(zip(param_names()[name], values, strict=True))


def _positional(name: str) -> None:
    if name in READABLE:
        raise ValueError(
            f"#sparse_iter.{name} has named parameters; use its host class "
            "(sparsecomp.targets.target_from_attr, attr_text())"
        )


def build(name: str, **values: ir.Attribute) -> ir.Attribute:
    """``#sparse_iter.<name><...>`` from parameters given by name."""
    if name not in param_names():
        raise ValueError(f"no attribute #sparse_iter.{name}; known: {sorted(param_names())}")
    _positional(name)
    names = param_names()[name]
    if set(values) != set(names):
        raise ValueError(f"#sparse_iter.{name} takes parameters {names}, got {sorted(values)}")
    ctx = next(iter(values.values())).context if values else None
    body = ", ".join(str(values[n]) for n in names)
    return ir.Attribute.parse(f"{PREFIX}{name}<{body}>", ctx)


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
