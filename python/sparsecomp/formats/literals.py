"""MLIR literal syntax: string literals and the numbers of the readable attribute syntax.

Exactly as MLIR's parser reads and its AsmPrinter writes them, so that host
objects print the same text as the attributes they mirror (no MLIR import).
"""

from __future__ import annotations

import math
import re

from sparsecomp.errors import FormatError

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}


def parse_string(text: str) -> str:
    """An MLIR string literal (escapes ``\\n \\t \\\\ \\"`` and ``\\XX`` bytes, UTF-8)."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise FormatError(f"expected a string literal, got '{text}'")
    out, i, body = bytearray(), 0, text[1:-1]
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
        elif body[i + 1 : i + 2] in _ESCAPES:
            out += _ESCAPES[body[i + 1]].encode("utf-8")
            i += 2
        elif re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 1 : i + 3]):
            out.append(int(body[i + 1 : i + 3], 16))
            i += 3
        else:
            raise FormatError(f"bad escape in string literal {text}")
    return out.decode("utf-8", errors="replace")


_INTEGER = re.compile(r"-?(?:[0-9]+|0x[0-9a-fA-F]+)")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|inf|nan)")
_EXACT_INT = 2**53


def parse_number(text: str) -> int | float:
    """A number of the readable attribute syntax: an integer, a decimal with a '.', inf, nan.

    MLIR's lexer needs the '.' in a float literal (``1e-05`` does not lex as
    one number); :class:`FormatError` says so.
    """
    text = text.strip()
    if _INTEGER.fullmatch(text):
        return int(text, 0) if "0x" in text else int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    hint = " (floats need a '.', e.g. 1.0e-05)" if re.fullmatch(r"-?\d+[eE].*", text) else ""
    raise FormatError(f"bad number '{text}'{hint}")


def format_number(value: float) -> str:
    """The shortest text that reads back as exactly ``value``, as the dialect prints it.

    Integral values below 2**53 print as integers (``16``); others as
    Python's ``repr`` with a '.' always before the exponent (``0.01``,
    ``1.0e-05``, ``1.0e+20``); ``inf``, ``-inf``, ``nan``. The C++ twin is
    ``formatNumber`` in dialects/SparseIterDialect.cpp.
    """
    v = float(value)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == math.trunc(v) and abs(v) < _EXACT_INT:
        return str(int(v))
    mantissa, e, exponent = repr(v).partition("e")
    if e and "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


def format_string(value: str) -> str:
    """A string literal as MLIR prints it (``llvm::printEscapedString``)."""
    out = []
    for byte in value.encode("utf-8"):
        ch = chr(byte)
        if ch == "\\":
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F and ch != '"':
            out.append(ch)
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'
