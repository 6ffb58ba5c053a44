"""The engine behind ``sparsecomp-opt --verify-diagnostics``.

It mirrors MLIR's ``SourceMgrDiagnosticVerifierHandler`` in pure Python: the
checked file carries comments that say which diagnostics the tool must emit,
and every emitted diagnostic must be announced by one of them.

Annotation syntax (one annotation per line, anywhere on it, usually in a ``//`` comment)::

    expected-<severity>[-re][@<where>][ <count>] {{<message>}}

* ``<severity>`` is ``error``, ``warning``, ``note`` or ``remark``.
* ``<where>`` picks the line the diagnostic must be reported on; without it,
  the annotation's own line:
  - ``@+K`` / ``@-K``: K lines below / above the annotation;
  - ``@above`` / ``@below``: the nearest line above / below that carries no
    annotation, so that several annotations can be stacked (as in MLIR);
  - ``@unknown``: a diagnostic without a location (line 0);
  - ``@#NAME``: the line that carries the marker comment ``// #NAME``.
* ``<count>`` (default 1) is how many identical diagnostics the annotation
  accounts for; each must be produced.
* ``<message>`` runs from the first ``{{`` to the *last* ``}}`` on the line.
  It must be a substring of the diagnostic's message.  With ``-re`` it mixes
  literal text with ``{{regex}}`` blocks, e.g.
  ``expected-error-re {{value {{[0-9]+}} out of range}}``; the result is
  searched for (not anchored) in the message.  Regex blocks use Python's
  ``re`` syntax, with POSIX classes such as ``[[:digit:]]`` translated.

Example: ``// expected-note@below 2 {{declared here}}`` expects the next
non-annotation line to produce two notes whose message contains "declared here".
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

SEVERITIES = ("error", "warning", "note", "remark")

_TOKEN = re.compile(r"(?<![\w-])expected-(error|warning|note|remark)(-re)?(?=[@\s{]|$)")
_HEAD = re.compile(r"\s*(?:@(?P<at>[^\s{]*))?\s*(?:(?P<count>\d+)\s*)?")
_OFFSET = re.compile(r"([+-])(\d+)")
_MARKER = re.compile(r"//\s*#([A-Za-z_]\w*)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_POSIX_CLASS = re.compile(r"\[:([a-z]+):\]")
# POSIX bracket classes (LLVM regexes are POSIX EREs) and their Python spelling.
_POSIX_CLASSES = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "space": r"\s"}
_POSIX_CLASSES |= {"upper": "A-Z", "lower": "a-z", "xdigit": "0-9A-Fa-f", "blank": r" \t"}
_POSIX_CLASSES["punct"] = r"!-/:-@\[-`{-~"


@dataclass(frozen=True)
class Diagnostic:
    """A diagnostic emitted by the tool (or by the verifier itself).

    ``line`` and ``col`` are 1-based; ``line == 0`` means an unknown location.
    """

    severity: str
    filename: str
    line: int
    col: int
    message: str

    def __post_init__(self) -> None:
        _check_severity(self.severity)


@dataclass(frozen=True)
class Expectation:
    """One ``expected-*`` annotation, resolved to the line it refers to.

    ``message_or_regex`` is the text between the outer braces; when
    ``is_regex`` it is in MLIR's ``-re`` form (literal text and ``{{regex}}``
    blocks).  ``source_line``/``source_col`` locate the annotation itself
    (0 when unknown) and are used to report it.
    """

    severity: str
    line: int
    message_or_regex: str
    is_regex: bool = False
    count: int = 1
    source_line: int = 0
    source_col: int = 1

    def __post_init__(self) -> None:
        _check_severity(self.severity)
        if self.count < 1:
            raise ValueError(f"expectation count must be positive, got {self.count}")

    def matches(self, message: str) -> bool:
        """Whether ``message`` satisfies the text (not severity/line); ValueError if bad -re."""
        if self.is_regex:
            return compile_message_regex(self.message_or_regex).search(message) is not None
        return self.message_or_regex in message


def _check_severity(severity: str) -> None:
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}; expected one of {SEVERITIES}")


def format_diagnostic(d: Diagnostic) -> str:
    """Render ``file:line:col: severity: message`` (``file: severity: message`` if line is 0)."""
    where = f"{d.filename}:{d.line}:{d.col}" if d.line else d.filename
    return f"{where}: {d.severity}: {d.message}"


@functools.lru_cache(maxsize=256)
def compile_message_regex(content: str) -> re.Pattern[str]:
    """Compile an ``-re`` message: literal text is escaped, ``{{...}}`` blocks kept as regexes.

    Raises ``ValueError`` with MLIR's wording when a block is unterminated or invalid.
    """
    parts: list[str] = []
    rest = content
    while (start := rest.find("{{")) >= 0:
        if (end := rest.find("}}", start + 2)) < 0:
            raise ValueError("found start of regex with no end '}}'")
        parts += [re.escape(rest[:start]), f"({_regex_block(rest[start + 2 : end])})"]
        rest = rest[end + 2 :]
    return _compile("".join([*parts, re.escape(rest)]))


def _regex_block(block: str) -> str:
    """Validate one ``{{...}}`` block on its own (as MLIR does); translate POSIX classes."""
    for name in _POSIX_CLASS.findall(block):
        if name not in _POSIX_CLASSES:
            raise ValueError(f"invalid regex: unknown character class '[:{name}:]'")
    return _compile(_POSIX_CLASS.sub(lambda m: _POSIX_CLASSES[m[1]], block)).pattern


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        with warnings.catch_warnings():  # e.g. "possible nested set" for '[[': not an error
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regex: {exc}") from None


class _Context(NamedTuple):
    """What resolving ``@where`` needs to know about the whole file."""

    annotated: frozenset[int]
    markers: dict[str, list[int]]
    num_lines: int


def parse_expectations(text: str, filename: str) -> tuple[list[Expectation], list[Diagnostic]]:
    """Collect the annotations of ``text``.

    Returns the expectations and, for each malformed annotation, an error
    located at the annotation (the annotation itself is then dropped).
    """
    lines = text.split("\n")  # as MLIR does; a "\r" before "\n" is harmless
    tokens = {n: m for n, line in enumerate(lines, 1) if (m := _TOKEN.search(line))}
    markers: dict[str, list[int]] = {}
    for n, line in enumerate(lines, 1):
        for name in _MARKER.findall(line):
            markers.setdefault(name, []).append(n)
    ctx = _Context(frozenset(tokens), markers, len(lines))
    expectations: list[Expectation] = []
    errors: list[Diagnostic] = []
    for n, token in tokens.items():
        result = _parse_annotation(lines[n - 1], token, n, ctx)
        if isinstance(result, str):
            errors.append(Diagnostic("error", filename, n, token.start() + 1, result))
        else:
            expectations.append(result)
    return expectations, errors


def _parse_annotation(line: str, token: re.Match[str], n: int, ctx: _Context) -> Expectation | str:
    """Parse the annotation starting at ``token``; a ``str`` result is an error message."""
    kind = token[0]
    head = _HEAD.match(line, token.end())
    assert head is not None  # every part of _HEAD is optional
    if not line.startswith("{{", head.end()):
        return f"expected '{{{{' in {kind}"
    body = line[head.end() + 2 :]
    if (close := body.rfind("}}")) < 0:
        return f"expected '}}}}' at end of {kind}"
    message, count = body[:close], int(head["count"] or 1)
    if count < 1:
        return f"repeat count in {kind} must be positive"
    if token[2]:
        try:
            compile_message_regex(message)
        except ValueError as exc:
            return str(exc)
    target = _resolve_line(head["at"], kind, n, ctx)
    if isinstance(target, str):
        return target
    return Expectation(token[1], target, message, bool(token[2]), count, n, token.start() + 1)


def _resolve_line(at: str | None, kind: str, n: int, ctx: _Context) -> int | str:
    """The line ``@at`` designates from line ``n``, or an error message."""
    if at is None:
        return n
    if offset := _OFFSET.fullmatch(at):
        target = n + int(offset[2]) if offset[1] == "+" else n - int(offset[2])
        return target if target >= 1 else f"line offset '{at}' is before the start of the file"
    if at == "unknown":
        return 0
    if at in ("above", "below"):
        step, stop = (-1, 0) if at == "above" else (1, ctx.num_lines + 1)
        found = next((i for i in range(n + step, stop, step) if i not in ctx.annotated), None)
        return found or f"no line without an annotation is {at} this {kind}"
    if at.startswith("#") and _IDENT.fullmatch(at[1:]):
        lines = ctx.markers.get(at[1:], [])
        if len(lines) == 1:
            return lines[0]
        if not lines:
            return f"reference to undefined marker '{at}' in {kind}"
        return f"marker '{at}' is defined on several lines: {', '.join(map(str, lines))}"
    return f"invalid line offset '@{at}' in {kind}"


def check(
    expectations: Sequence[Expectation],
    diagnostics: Iterable[Diagnostic],
    filename: str,
    *,
    ignore_notes: bool = False,
) -> list[Diagnostic]:
    """Match ``diagnostics`` against ``expectations``; return the verifier's errors.

    Diagnostics from another file than ``filename`` ('-' and '' mean
    ``filename``) are unexpected.  With ``ignore_notes``, note diagnostics
    and note expectations are both left out.  An empty result means success.
    """
    kept = [e for e in expectations if not (ignore_notes and e.severity == "note")]
    used = [0] * len(kept)
    errors: list[Diagnostic] = []
    for diag in diagnostics:
        if ignore_notes and diag.severity == "note":
            continue
        if (error := _consume(kept, used, diag, filename)) is not None:
            errors.append(error)
    for exp, n in zip(kept, used, strict=True):
        if n < exp.count:
            said = "was not produced" if n == 0 else f"was produced {n} of {exp.count} times"
            text = f'expected {exp.severity} "{exp.message_or_regex}" {said}'
            errors.append(Diagnostic("error", filename, exp.source_line, exp.source_col, text))
    return errors


def _consume(
    expectations: Sequence[Expectation], used: list[int], diag: Diagnostic, filename: str
) -> Diagnostic | None:
    """Count ``diag`` against the first expectation with room left, else describe the miss."""
    near_miss: Expectation | None = None
    if diag.filename in ("", "-", filename):
        for i, exp in enumerate(expectations):
            if exp.line != diag.line or not exp.matches(diag.message):
                continue
            if exp.severity != diag.severity:
                near_miss = near_miss or exp
            elif used[i] < exp.count:
                used[i] += 1
                return None
    if near_miss is not None:
        text = f"'{diag.severity}' diagnostic emitted when expecting a '{near_miss.severity}'"
        return Diagnostic("error", filename, near_miss.source_line, near_miss.source_col, text)
    where = diag.filename if diag.filename not in ("", "-") else filename
    text = f"unexpected {diag.severity}: {diag.message}"
    return Diagnostic("error", where, diag.line, diag.col, text)


def verify_diagnostics(
    text: str, diagnostics: Iterable[Diagnostic], filename: str, *, ignore_notes: bool = False
) -> list[Diagnostic]:
    """Parse ``text``'s annotations and check ``diagnostics``: all errors, parse errors first."""
    expectations, errors = parse_expectations(text, filename)
    return errors + check(expectations, diagnostics, filename, ignore_notes=ignore_notes)
