"""Value rules for each ``#sparse_iter`` attribute.

Every attribute is checked by building its host-side twin from the
attribute text, whose constructor holds the rules (one definition for the
compiler and the Python API): :class:`~sparsecomp.targets.resolve.Encoding`
for ``sparsity`` and ``encoding``, :class:`~sparsecomp.formats.Layout` and
:class:`~sparsecomp.formats.Composable` for ``layout``, ``part`` and
``composable``, the targets for ``cpu`` and ``cuda``, and
:class:`~sparsecomp.formats.Sparsifier`. The dialect's parsers check only
the syntax.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.attrs import mnemonic

Problem = str


def _host_check(build: Callable[[str], object]) -> Callable[[ir.Attribute], Iterator[Problem]]:
    def check(attr: ir.Attribute) -> Iterator[Problem]:
        try:
            build(str(attr))
        except SparsecompError as e:
            yield e.message

    return check


def _encoding(text: str) -> object:
    from sparsecomp.targets.resolve import Encoding

    return Encoding.parse(text)


def _layout(text: str) -> object:
    from sparsecomp.formats.names import layout_from_attr

    return layout_from_attr(text)


def _part(text: str) -> object:
    from sparsecomp.formats.attrtext import parse_attr
    from sparsecomp.formats.composable import Part

    return Part.from_node(parse_attr(text))


def _target(text: str) -> object:
    from sparsecomp.targets import target_from_attr

    return target_from_attr(text)


def _sparsifier(text: str) -> object:
    from sparsecomp.formats.sparsifiers import Sparsifier

    return Sparsifier.parse(text)


_CHECKERS: dict[str, Callable[[ir.Attribute], Iterator[Problem]]] = {
    "sparsity": _host_check(_encoding),
    "encoding": _host_check(_encoding),
    "layout": _host_check(_layout),
    "composable": _host_check(_layout),
    "part": _host_check(_part),
    "cpu": _host_check(_target),
    "cuda": _host_check(_target),
    "sparsifier": _host_check(_sparsifier),
}


def check_attr(attr: ir.Attribute) -> Iterator[Problem]:
    """Problems with one ``#sparse_iter`` attribute (nothing for other attributes)."""
    name = mnemonic(attr)
    if name in _CHECKERS:
        yield from _CHECKERS[name](attr)
