"""Read the printed form of ``#sparse_iter`` attributes without MLIR.

The host side (``sparsecomp.formats``, the runtime) must map layouts to and
from attribute text without importing the bindings. The subset parsed here
is what MLIR prints for our attributes' parameters: strings, integers and
floats with an optional ``: type``, ``[...]`` arrays, ``array<i64: ...>``,
``affine_map<...>``, ``{key = value}`` dictionaries, nested
``#sparse_iter.<name><...>`` attributes, bare identifiers (:class:`Keyword`:
``x86_64``, ``avx2``) and ``key = value`` parameters (:class:`Field`: the
readable syntax's named parameters, ``vector_bits = 256``). Anything else is
kept as raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparsecomp.errors import FormatError
from sparsecomp.formats.literals import format_f64, format_string, parse_f64, parse_string

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
        self, mnemonic: str, positional: int, keys: tuple[str, ...]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``positional`` leading arguments and exactly the named ``keys`` (in any order)."""
        lead, named = self.args[:positional], self.args[positional:]
        found = {f.key: f.value for f in named if isinstance(f, Field)}
        if (
            self.mnemonic != mnemonic
            or len(lead) != positional
            or any(isinstance(a, Field) for a in lead)
            or len(found) != len(named)
            or set(found) != set(keys)
        ):
            wanted = ", ".join(["<value>"] * positional + [f"{k} = ..." for k in keys])
            raise FormatError(
                f"expected #sparse_iter.{mnemonic}<{wanted}>, got {format_value(self)}"
            )
        return lead, found


@dataclass(frozen=True)
class Keyword:
    """A bare identifier: ``x86_64``, ``avx2``, ``sm_90``."""

    name: str


@dataclass(frozen=True)
class Field:
    """A named parameter, ``key = value``; integers print without a type."""

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


def _strip_type(text: str) -> str:
    parts = split_top_level(text, ":")
    return parts[0] if len(parts) == 2 else text


_INT = re.compile(r"-?\d+")
_BARE = re.compile(r"[A-Za-z_][\w$.]*")
_FIELD = re.compile(r"([A-Za-z_]\w*)\s*=\s*(.+)", re.S)
_FLOAT = re.compile(r"-?(\d+\.\d*([eE][-+]?\d+)?|\d+[eE][-+]?\d+|inf|nan)")


def parse_value(text: str) -> Any:
    """One parameter value from its printed text."""
    text = text.strip()
    if text.startswith('"'):
        return parse_string(text)
    if text.startswith(PREFIX):
        return parse_attr(text)
    if text.startswith("affine_map<"):
        from sparsecomp.formats.dimmap import DimMap

        return DimMap.parse(text)
    if text.startswith("array<"):
        body = text[len("array<") : -1]
        _, _, values = body.partition(":")
        number = parse_f64 if body.lstrip().startswith("f") else _number
        return tuple(number(v) for v in split_top_level(values))
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
    bare = _strip_type(text)
    if bare in ("true", "false"):
        return bare == "true"
    if _INT.fullmatch(bare):
        return int(bare)
    if _FLOAT.fullmatch(bare) or bare.startswith("0x"):
        return parse_f64(bare)
    if _BARE.fullmatch(text):
        return Keyword(text)
    return Raw(text)


def _number(text: str) -> int | float:
    text = text.strip()
    return int(text) if _INT.fullmatch(text) else float(text)


def parse_attr(text: str) -> AttrNode:
    """``#sparse_iter.name<...>`` -> :class:`AttrNode` with parsed arguments."""
    text = text.strip()
    match = re.match(r"#sparse_iter\.(\w+)<", text)
    if not match or not text.endswith(">"):
        raise FormatError(f"not a #sparse_iter attribute: '{text}'")
    body = text[match.end() : -1]
    return AttrNode(match.group(1), tuple(parse_value(p) for p in split_top_level(body)))


def format_value(value: Any) -> str:
    """Print a parameter value the way MLIR prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return format_string(value)
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{format_f64(value)} : f64"
    if isinstance(value, tuple):
        elt = "f64" if any(isinstance(v, float) for v in value) else "i64"
        if not value:
            return f"array<{elt}>"
        body = ", ".join(format_f64(v) if elt == "f64" else str(v) for v in value)
        return f"array<{elt}: {body}>"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = [f"{k} = {format_value(v)}" for k, v in sorted(value.items())]
        return "{" + ", ".join(items) + "}"
    if isinstance(value, AttrNode):
        return f"{PREFIX}{value.mnemonic}<{', '.join(format_value(a) for a in value.args)}>"
    if isinstance(value, Keyword):
        return value.name
    if isinstance(value, Field):
        plain = isinstance(value.value, int) and not isinstance(value.value, bool)
        return f"{value.key} = {value.value if plain else format_value(value.value)}"
    if isinstance(value, Raw):
        return value.text
    from sparsecomp.formats.dimmap import DimMap

    if isinstance(value, DimMap):
        return f"affine_map<{value}>"
    raise TypeError(f"cannot print {value!r} as an attribute parameter")
