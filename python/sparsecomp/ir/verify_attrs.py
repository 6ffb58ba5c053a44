"""Value rules for each ``#sparse_iter`` attribute.

``sparsity`` and ``encoding`` are checked here; ``layout``, ``part``,
``composable``, ``cpu``, ``cuda`` and ``sparsifier`` are checked by building
their host-side twins from the attribute text, whose constructors hold the
rules (one definition for the compiler and the Python API).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.attrs import mnemonic, params

SPARSITY_KINDS = {"unstructured": 0, "nm": 2, "block": 2, "ragged": 0}

Problem = str


def _check_sparsity(attr: ir.Attribute) -> Iterator[Problem]:
    p = params(attr)
    kind = ir.StringAttr(p["kind"]).value
    if kind not in SPARSITY_KINDS:
        yield f"unknown sparsity kind '{kind}'; expected one of {', '.join(SPARSITY_KINDS)}"
        return
    values = list(p["params"])
    if len(values) != SPARSITY_KINDS[kind]:
        yield f"sparsity '{kind}' takes {SPARSITY_KINDS[kind]} params, got {len(values)}"
    elif kind == "nm" and not 0 < values[0] <= values[1]:
        yield f"n:m sparsity needs 0 < n <= m, got {values[0]}:{values[1]}"
    elif kind == "block" and min(values) <= 0:
        yield f"block sizes must be positive, got {values[0]}x{values[1]}"
    density = ir.FloatAttr(p["density"]).value
    if not 0.0 <= density <= 1.0:
        yield f"density must lie in [0, 1], got {density}"


def _check_encoding(attr: ir.Attribute) -> Iterator[Problem]:
    p = params(attr)
    yield from _check_sparsity(p["sparsity"])  # ODS checked it is a #sparse_iter.sparsity
    index = ir.IntegerAttr(p["operand_index"]).value
    types = list(ir.ArrayAttr(p["element_types"]))
    maps = list(ir.ArrayAttr(p["indexing_maps"]))
    if index < 0:
        yield f"operand_index must be non-negative, got {index}"
    if not all(isinstance(t, ir.TypeAttr) for t in types):
        yield "element_types must be an array of types"
    if not all(isinstance(m, ir.AffineMapAttr) for m in maps):
        yield "indexing_maps must be an array of affine maps"
    elif maps and index >= len(maps):
        yield f"operand_index {index} is out of range for {len(maps)} indexing maps"


def _host_check(build: Callable[[str], object]) -> Callable[[ir.Attribute], Iterator[Problem]]:
    def check(attr: ir.Attribute) -> Iterator[Problem]:
        try:
            build(str(attr))
        except SparsecompError as e:
            yield e.message

    return check


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
    "sparsity": _check_sparsity,
    "encoding": _check_encoding,
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
