"""MLIR literal syntax: string, f64 and ``array<f64: ...>`` literals, parsed and printed.

Exactly as MLIR's parser reads and its AsmPrinter writes them, so that host
objects print the same text as the attributes they mirror (no MLIR import).
"""

from __future__ import annotations

import math
import re
import struct

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


_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?")
_HEX = re.compile(r"0x[0-9a-fA-F]{1,16}")


def parse_f64(text: str) -> float:
    """One f64 literal of an ``array<f64: ...>``: decimal with a dot, or ``0x`` bit pattern."""
    text = text.strip()
    if _DECIMAL.fullmatch(text):
        return float(text)
    if _HEX.fullmatch(text):
        return struct.unpack("<d", int(text, 16).to_bytes(8, "little"))[0]
    hint = " (MLIR float literals need a '.', e.g. 16.0)" if re.fullmatch(r"-?\d+", text) else ""
    raise FormatError(f"bad f64 literal '{text}'{hint}")


def parse_f64_array(text: str) -> tuple[float, ...]:
    """``array<f64>`` or ``array<f64: a, b, ...>`` -> floats."""
    text = text.strip()
    match = re.fullmatch(r"array<\s*f64\s*(?::(.*))?>", text, re.DOTALL)
    if not match:
        raise FormatError(f"sparsifier params must be an array<f64: ...>, got '{text}'")
    body = match.group(1)
    if body is None:
        return ()
    pieces = [p.strip() for p in body.split(",")]
    if not body.strip() or any(not p for p in pieces):
        raise FormatError(f"empty element in '{text}'")
    return tuple(parse_f64(p) for p in pieces)


def format_f64_array(values: tuple[float, ...]) -> str:
    """``array<f64: ...>`` as MLIR prints it (``array<f64>`` when empty)."""
    if not values:
        return "array<f64>"
    return "array<f64: " + ", ".join(format_f64(v) for v in values) + ">"


def format_f64(value: float) -> str:
    """An f64 exactly as MLIR's AsmPrinter prints it (``printFloatValue``).

    ``1.000000e-03`` when six significant digits round-trip, else the shortest
    decimal APFloat prints with up to 17 digits (``0.123456789``,
    ``1.2345670000000001E+308``) if it contains a '.', else the bit pattern in
    hex (``0x419D6F3454000000`` for 123456789.0, ``0x7FF0000000000000`` for inf).
    """
    v = float(value)
    if math.isfinite(v):
        short = _apfloat_string(v, 6, 0, False)
        if float(short) == v and math.copysign(1, float(short)) == math.copysign(1, v):
            return short
        default = _apfloat_string(v, 0, 3, True)
        if "." in default:
            return default
    bits = struct.unpack("<Q", struct.pack("<d", v))[0]
    return f"0x{bits:X}"


def _apfloat_string(v: float, precision: int, max_padding: int, truncate_zero: bool) -> str:
    """LLVM's ``APFloat::toString(Str, FormatPrecision, FormatMaxPadding, TruncateZero)``."""
    sign = "-" if math.copysign(1, v) < 0 else ""
    if v == 0:
        if max_padding:
            return sign + "0"
        if truncate_zero:
            return sign + "0.0E+0"
        return sign + "0." + "0" * max(precision, 1) + "e+00"
    if precision == 0:
        precision = 2 + 53 * 59 // 196
    num, den = abs(v).as_integer_ratio()
    k = den.bit_length() - 1
    sig, exp = (num, 0) if k == 0 else (num * 5**k, -k)
    # Drop excess decimal digits by truncation (APFloat's first AdjustToPrecision).
    bits_required = (precision * 196 + 58) // 59
    if sig.bit_length() > bits_required:
        tens = (sig.bit_length() - bits_required) * 59 // 196
        if tens:
            exp += tens
            sig //= 10**tens
    digits = str(sig)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    # Round half up to `precision` digits (the second AdjustToPrecision).
    if len(digits) > precision:
        total = len(digits)
        if digits[precision] < "5":
            digits = digits[:precision].rstrip("0")
            exp += total - len(digits)
        else:
            kept = digits[:precision].rstrip("9")
            if not kept:
                digits, exp = "1", exp + total
            else:
                digits = kept[:-1] + str(int(kept[-1]) + 1)
                exp += total - len(digits)
    nd = len(digits)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or nd + exp > precision
    else:
        msd = exp + nd - 1
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        e = exp + nd - 1
        out = digits[0] + "." + ("0" if nd == 1 and truncate_zero else digits[1:])
        if not truncate_zero and precision > nd - 1:
            out += "0" * (precision - nd + 1)
        exp_digits = str(abs(e))
        if not truncate_zero and len(exp_digits) < 2:
            exp_digits = "0" + exp_digits
        return f"{sign}{out}{'E' if truncate_zero else 'e'}{'+' if e >= 0 else '-'}{exp_digits}"
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = exp + nd
    if whole > 0:
        return f"{sign}{digits[:whole]}.{digits[whole:]}"
    return f"{sign}0.{'0' * -whole}{digits}"


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
