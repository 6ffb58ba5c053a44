"""Parse textual pass pipelines that mix upstream and sparsecomp passes.

Python passes cannot be named in an MLIR pipeline string, so sparsecomp parses
the pipeline itself (MLIR's textual syntax)::

    builtin.module(canonicalize, sparse-iter-fold-encodings{max-iterations=3},
                   func.func(cse))

and builds a ``PassManager``: upstream elements are handed to
``PassManager.add`` as text, sparsecomp passes are added as Python callables.
A sparsecomp pass nested under an anchor such as ``func.func`` runs on every
op of that name under the module. Names of files in ``pipelines/`` are named
pipelines and expand in place.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from mlir import ir
from mlir.passmanager import PassManager

from sparsecomp.errors import PipelineError
from sparsecomp.ir.native import capture_native_stderr
from sparsecomp.transforms import get_pass, is_sparsecomp_pass, unknown_pass_message
from sparsecomp.transforms.base import SparsecompPass

PIPELINE_DIR = Path(__file__).resolve().parent.parent / "pipelines"
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_LLVM_BAD_VALUE = re.compile(r"for the --([\w\-]+) option: '(.*)' value invalid")


@dataclasses.dataclass
class Element:
    """One pipeline element: a pass with options, or an anchor with children."""

    name: str
    options: str = ""  # the text between braces, verbatim
    children: list[Element] | None = None
    column: int = 0  # 1-based column of the name in the pipeline text, 0 if unknown
    #: the named pipeline it came from (its errors are placed at that name, which the
    #: caller wrote: a column in the pipeline's file pointed past the caller's text)
    via: str = ""

    @property
    def location(self) -> str | None:
        return f"<pass-pipeline>:1:{self.column}" if self.column else None

    def text(self) -> str:
        if self.children is not None:
            return f"{self.name}({', '.join(c.text() for c in self.children)})"
        return f"{self.name}{{{self.options}}}" if self.options else self.name


class _Parser:
    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def error(self, message: str) -> PipelineError:
        return PipelineError(
            f"{message} in '{self.text}'", location=f"<pass-pipeline>:1:{self.pos + 1}"
        )

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def elements(self) -> list[Element]:
        items = [self.element()]
        while self.peek() == ",":
            self.pos += 1
            items.append(self.element())
        return items

    def element(self) -> Element:
        self.skip_space()
        match = _NAME.match(self.text, self.pos)
        if not match:
            raise self.error("expected a pass or anchor name")
        self.pos = match.end()
        element = Element(match.group(), column=match.start() + 1)
        if self.peek() == "{":
            element.options = self.balanced("{", "}")
        if self.peek() == "(":
            self.pos += 1
            element.children = [] if self.peek() == ")" else self.elements()
            if self.peek() != ")":
                raise self.error("expected ')'")
            self.pos += 1
        return element

    def balanced(self, open_: str, close: str) -> str:
        """The text inside brackets starting at ``pos``; brackets in quotes do not count."""
        depth, start, opened, quote = 0, self.pos + 1, self.pos, ""
        while self.pos < len(self.text):
            c = self.text[self.pos]
            self.pos += 1
            if quote:
                quote = "" if c == quote else quote
            elif c in "\"'":
                quote = c
            else:
                depth += (c == open_) - (c == close)
                if depth == 0:
                    return self.text[start : self.pos - 1].strip()
        self.pos = opened
        raise self.error(f"unbalanced '{open_}'")


def parse_pipeline(text: str) -> list[Element]:
    """The elements of a comma-separated pipeline; :class:`PipelineError` if malformed."""
    parser = _Parser(text)
    if not parser.peek():
        return []
    items = parser.elements()
    if parser.peek():
        raise parser.error(f"unexpected '{parser.peek()}'")
    return items


def _option_value(text: str, pos: int) -> tuple[str, int]:
    """The value starting at ``pos`` (quotes removed, braces kept) and the end position."""
    if text[pos] in "\"'":
        end = text.find(text[pos], pos + 1)
        if end < 0:
            raise PipelineError(f"unterminated quote in pass options '{text}'")
        return text[pos + 1 : end], end + 1
    if text[pos] == "{":
        parser = _Parser(text)
        parser.pos = pos
        parser.balanced("{", "}")
        return text[pos : parser.pos], parser.pos
    end = pos
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[pos:end], end


def parse_options(text: str) -> dict[str, str]:
    """``key=value`` pairs separated by spaces; values may be quoted or braced.

    A bare ``key`` means ``key=true``. Quotes around a value are removed; a
    braced value (a nested option list) is kept with its braces.
    """
    options: dict[str, str] = {}
    key_pattern, pos = re.compile(r"\s*([\w\-]+)"), 0
    while text[pos:].strip():
        match = key_pattern.match(text, pos)
        if not match:
            raise PipelineError(f"malformed pass options '{text}'")
        pos = match.end()
        if pos < len(text) and text[pos] == "=" and pos + 1 < len(text):
            options[match.group(1)], pos = _option_value(text, pos + 1)
        elif pos < len(text) and not text[pos].isspace():
            raise PipelineError(f"malformed pass options '{text}'")
        else:
            options[match.group(1)] = "true"
    return options


def named_pipelines() -> dict[str, Path]:
    """Name -> file of every pipeline in ``pipelines/``."""
    return {p.stem: p for p in sorted(PIPELINE_DIR.glob("*.txt"))}


def _load_named(path: Path) -> list[Element]:
    lines = [ln.split("#", 1)[0] for ln in path.read_text().splitlines()]
    return parse_pipeline(" ".join(lines))


def expand(elements: list[Element], stack: tuple[str, ...] = ()) -> list[Element]:
    """Replace named pipelines by their elements, recursively."""
    named, out = named_pipelines(), []
    for e in elements:
        if e.children is not None:
            out.append(dataclasses.replace(e, children=expand(e.children, stack)))
        elif e.name in named and not is_sparsecomp_pass(e.name):
            if e.options:
                message = f"named pipeline '{e.name}' takes no options"
                raise PipelineError(message, location=e.location)
            if e.name in stack:
                raise PipelineError(f"named pipeline '{e.name}' includes itself")
            inner = expand(_load_named(named[e.name]), (*stack, e.name))
            out += [_placed_at(x, e.column, e.via or e.name) for x in inner]
        else:
            out.append(e)
    return out


def _placed_at(element: Element, column: int, via: str) -> Element:
    """``element`` (of a named pipeline) placed at the name the caller wrote."""
    children = None
    if element.children is not None:
        children = [_placed_at(c, column, via) for c in element.children]
    return dataclasses.replace(element, column=column, via=via, children=children)


def make_pass(element: Element) -> SparsecompPass:
    """The configured pass of an element; errors carry the element's location."""
    try:
        return get_pass(element.name).from_options(parse_options(element.options))
    except PipelineError as exc:
        raise PipelineError(exc.message, location=element.location, hint=exc.hint) from None


class _Verified:
    """Runs a sparsecomp pass on IR that an earlier pass of the pipeline verified."""

    def __init__(self, inner: SparsecompPass):
        self.inner = inner

    def __call__(self, op: ir.Operation, pass_) -> None:
        self.inner.run_verified(op, pass_)


class _Nested:
    """Runs a sparsecomp pass on every op called ``anchor`` under the module."""

    def __init__(self, anchor: str, inner: SparsecompPass | _Verified):
        self.anchor, self.inner = anchor, inner

    def __call__(self, op: ir.Operation, pass_) -> None:
        targets: list[ir.Operation] = []

        def collect(child: ir.Operation) -> ir.WalkResult:
            if child.name == self.anchor:
                targets.append(child)
                return ir.WalkResult.SKIP
            return ir.WalkResult.ADVANCE

        op.walk(collect, ir.WalkOrder.PRE_ORDER)
        for target in targets:
            self.inner(target, pass_)


def _contains_ours(element: Element) -> bool:
    if element.children is None:
        return is_sparsecomp_pass(element.name)
    return any(_contains_ours(c) for c in element.children)


def _add_upstream(pm: PassManager, text: str, element: Element) -> None:
    with capture_native_stderr() as native:
        try:
            pm.add(text)
            return
        except ValueError as exc:
            detail = str(exc).strip()
    if "does not refer to a registered pass" in detail:
        raise PipelineError(unknown_pass_message(element.name), location=element.location)
    # LLVM's option parser explains bad values on stderr; fold it into one line.
    bad = _LLVM_BAD_VALUE.search(native.text())
    first = next((ln for ln in detail.splitlines() if ln.strip()), detail)
    reason = (
        f"invalid value '{bad[2]}' for option '{bad[1]}'"
        if bad
        else first.replace("<Pass-Options-Parser>: ", "")
    )
    hint = None
    if element.via:
        hint = f"'{element.name}' is in the named pipeline '{element.via}'"
        if "restricted to 'builtin.module'" in reason:
            hint += f", whose passes run on a module: write builtin.module({element.via})"
    raise PipelineError(f"pass '{element.name}': {reason}", location=element.location, hint=hint)


def _add(
    pm: PassManager,
    element: Element,
    anchors: tuple[str, ...],
    ctx: ir.Context,
    ours: list[SparsecompPass] | None = None,
) -> None:
    """Add ``element`` to ``pm``; ``ours``: the sparsecomp passes added so far (the
    first verifies the pipeline's input, the later ones trust it)."""
    ours = [] if ours is None else ours
    if element.children is not None and _contains_ours(element):
        for child in element.children:
            _add(pm, child, (*anchors, element.name), ctx, ours)
        return
    if element.children is None and is_sparsecomp_pass(element.name):
        instance = make_pass(element)
        inner: SparsecompPass | _Verified = _Verified(instance) if ours else instance
        ours.append(instance)
        runner = _Nested(anchors[-1], inner) if anchors else inner
        pm.add(
            runner,
            name=type(instance).__name__,
            argument=instance.NAME,
            description=instance.summary(),
        )
        return
    try:
        _add_upstream(pm, _nest(element.text(), anchors), element)
    except PipelineError:
        if element.children is None:
            raise
        _blame_child(element, anchors, ctx)
        raise


def _nest(text: str, anchors: tuple[str, ...]) -> str:
    for anchor in reversed(anchors):
        text = f"{anchor}({text})"
    return text


def _blame_child(element: Element, anchors: tuple[str, ...], ctx: ir.Context) -> None:
    """Re-add the children of a rejected anchor one by one to report the culprit."""
    scratch = PassManager("builtin.module", ctx)
    for child in element.children or []:
        _add(scratch, child, (*anchors, element.name), ctx)


def build_pass_manager(pipeline: str, ctx: ir.Context) -> PassManager:
    """A PassManager on ``builtin.module`` running ``pipeline``.

    ``pipeline`` is either ``builtin.module(...)`` or a bare element list.
    """
    elements = expand(parse_pipeline(pipeline))
    if (
        len(elements) == 1
        and elements[0].name == "builtin.module"
        and elements[0].children is not None
    ):
        elements = elements[0].children
    pm = PassManager("builtin.module", ctx)
    ours: list[SparsecompPass] = []
    for element in elements:
        _add(pm, element, (), ctx, ours)
    return pm
