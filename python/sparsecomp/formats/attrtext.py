"""Read the printed form of ``#sparse_iter`` attributes without MLIR.

The host side (``sparsecomp.formats``, the runtime) must map attributes to
and from their text without importing the bindings. The subset parsed here
is what the dialect prints: strings, numbers (:func:`parse_number`),
``[...]`` lists, ``{key = value}`` dictionaries, nested
``#sparse_iter.<name><...>`` attributes, bare identifiers (:class:`Keyword`:
``x86_64``, ``unstructured``), ``name[a, b]`` (:class:`Indexed`: ``nm[2, 4]``,
``threshold[0.001]``) and ``key = value`` parameters (:class:`Field`:
``vector_bits = 256``). Anything else is kept as raw text (:class:`Raw`: types,
``affine_map<...>``, a layout's ``(d0, d1) -> (d0 : dense, ...)`` map, which
:mod:`sparsecomp.formats.layout` reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparsecomp.errors import FormatError
from sparsecomp.formats.literals import format_number, format_string, parse_number, parse_string

PREFIX = "#sparse_iter."


@dataclass(frozen=True)
class AttrNode:
    """``#sparse_iter.<mnemonic><args...>``."""

    mnemonic: str
    args: tuple[Any, ...]

    def args_of(self, mnemonic: str, count: int) -> tuple[Any, ...]:
        """The arguments, if this is ``#sparse_iter.<mnemonic>`` with ``count`` of them."""
        if self.mnemonic != mnemonic or len(self.args) != count:
            raise FormatError(
                f"expected #sparse_iter.{mnemonic} with {count} parameter(s), "
                f"got {format_value(self)}"
            )
        return self.args

    def fields(
        self,
        mnemonic: str,
        positional: int,
        keys: tuple[str, ...],
        optional: tuple[str, ...] = (),
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``positional`` leading arguments and exactly the named ``keys`` (in any order),
        and any of the ``optional`` ones."""
        lead, named = self.args[:positional], self.args[positional:]
        found = {f.key: f.value for f in named if isinstance(f, Field)}
        if (
            self.mnemonic != mnemonic
            or len(lead) != positional
            or any(isinstance(a, Field) for a in lead)
            or len(found) != len(named)
            or not set(keys) <= set(found) <= {*keys, *optional}
        ):
            wanted = ", ".join(
                ["<value>"] * positional
                + [f"{k} = ..." for k in keys]
                + [f"[{k} = ...]" for k in optional]
            )
            raise FormatError(
                f"expected #sparse_iter.{mnemonic}<{wanted}>, got {format_value(self)}"
            )
        return lead, found


@dataclass(frozen=True)
class Keyword:
    """A bare identifier: ``x86_64``, ``avx2``, ``sm_90``."""

    name: str


@dataclass(frozen=True)
class Indexed:
    """A name with numbers: ``nm[2, 4]``, ``threshold[0.001]``; ``args`` may be empty."""

    name: str
    args: tuple[int | float, ...]


@dataclass(frozen=True)
class Field:
    """A named parameter, ``key = value``."""

    key: str
    value: Any


@dataclass(frozen=True)
class Raw:
    """Text the parser does not interpret (a type, an unknown attribute)."""

    text: str


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets and string literals (``->`` is not a bracket)."""
    pieces, depth, start, i, in_string = [], 0, 0, 0, False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "([{<":
            depth += 1
        elif c in ")]}" or (c == ">" and text[i - 1] != "-"):
            depth -= 1
        elif c == sep and depth == 0:
            pieces.append(text[start:i].strip())
            start = i + 1
        i += 1
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


_BARE = re.compile(r"[A-Za-z_][\w$.]*")
_FIELD = re.compile(r"([A-Za-z_]\w*)\s*=\s*(.+)", re.S)
_INDEXED = re.compile(r"([A-Za-z_][\w.]*)\s*\[(.*)\]", re.S)
_NUMBER = re.compile(r"-?(\d|0x|inf|nan)")


def parse_value(text: str) -> Any:
    """One parameter value from its printed text."""
    text = text.strip()
    if text.startswith('"'):
        return parse_string(text)
    if text.startswith(PREFIX):
        return parse_attr(text)
    if text.startswith("["):
        return [parse_value(p) for p in split_top_level(text[1:-1])]
    if text.startswith("{"):
        out = {}
        for item in split_top_level(text[1:-1]):
            key, eq, value = item.partition("=")
            out[key.strip().strip('"')] = parse_value(value) if eq else True
        return out
    field = _FIELD.fullmatch(text)
    if field:
        return Field(field.group(1), parse_value(field.group(2)))
    indexed = _INDEXED.fullmatch(text)
    if indexed:
        args = tuple(parse_number(a) for a in split_top_level(indexed.group(2)))
        return Indexed(indexed.group(1), args)
    if text in ("true", "false"):
        return text == "true"
    if _NUMBER.match(text):
        try:
            return parse_number(text)
        except FormatError:
            return Raw(text)
    if _BARE.fullmatch(text):
        return Keyword(text)
    return Raw(text)


def parse_attr(text: str) -> AttrNode:
    """``#sparse_iter.name<...>`` -> :class:`AttrNode` with parsed arguments."""
    text = text.strip()
    match = re.match(r"#sparse_iter\.(\w+)<", text)
    if not match or not text.endswith(">"):
        raise FormatError(f"not a #sparse_iter attribute: '{text}'")
    body = text[match.end() : -1]
    return AttrNode(match.group(1), tuple(parse_value(p) for p in split_top_level(body)))


def format_value(value: Any) -> str:
    """Print a parameter value the way the dialect prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return format_string(value)
    if isinstance(value, int | float):
        return _number_text(value)
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, AttrNode):
        return f"{PREFIX}{value.mnemonic}<{', '.join(format_value(a) for a in value.args)}>"
    if isinstance(value, Keyword):
        return value.name
    if isinstance(value, Indexed):
        args = f"[{', '.join(_number_text(a) for a in value.args)}]" if value.args else ""
        return value.name + args
    if isinstance(value, Field):
        return f"{value.key} = {format_value(value.value)}"
    if isinstance(value, Raw):
        return value.text
    raise TypeError(f"cannot print {value!r} as an attribute parameter")


def _number_text(value: int | float) -> str:
    return str(value) if isinstance(value, int) else format_number(value)
