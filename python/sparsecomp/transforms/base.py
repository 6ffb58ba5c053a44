"""The base class of sparsecomp's Python passes.

A pass is a small frozen dataclass: its fields are the pass options (snake_case
in Python, kebab-case on the command line), validated in ``__post_init__``; its
docstring is its documentation (first line = the summary ``--list-passes``
shows). ``run(op, pass_)`` does the work on the anchor operation (a
``builtin.module``).

Before ``run``, every pass verifies the ``sparse_iter`` rules ODS does not check
(:mod:`sparsecomp.ir.verify`), so passes only see well-formed input. Errors are
reported through MLIR locations and ``signal_pass_failure``; a
:class:`SparsecompError` escaping ``run`` (the input's fault, said in its message)
is reported at the anchor with its hint, any other exception as a located
internal error with its traceback, never a crash.
"""

from __future__ import annotations

import dataclasses
import inspect
import traceback
import typing
from typing import Any, ClassVar

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import PipelineError, SparsecompError
from sparsecomp.ir.verify import verify

_TRUE = {"true", "1", "on", "yes"}
_FALSE = {"false", "0", "off", "no"}


def kebab(name: str) -> str:
    return name.replace("_", "-")


def _convert(value: str, annotation: Any, option: str) -> Any:
    """Parse one option value given on the command line."""
    try:
        if annotation is bool:
            lowered = value.lower()
            if lowered not in _TRUE | _FALSE:
                raise ValueError
            return lowered in _TRUE
        if annotation is int:  # passes hand options to C++ (int64 at most)
            number = int(value)
            if not -(2**63) <= number < 2**63:
                raise ValueError
            return number
        if annotation in (float, str):
            return annotation(value)
        if typing.get_origin(annotation) is typing.Literal:
            if value not in typing.get_args(annotation):
                raise ValueError
            return value
    except ValueError:
        pass
    else:
        raise PipelineError(f"option '{option}' has unsupported type {annotation}")
    expected = _describe(annotation)
    raise PipelineError(f"invalid value '{value}' for option '{option}': expected {expected}")


def _describe(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(annotation)))
    return {bool: "true or false", int: "a 64-bit integer", float: "a number"}.get(
        annotation, "a string"
    )


def _quote(value: Any) -> str:
    """An option value as pipeline text that parses back to the same value."""
    if isinstance(value, bool):
        return str(value).lower()
    text = str(value)
    if text and not any(c.isspace() or c in "{}()=,'\"" for c in text):
        return text
    return f"'{text}'" if '"' in text else f'"{text}"'


@dataclasses.dataclass(frozen=True)
class SparsecompPass:
    """Base class; subclasses set ``NAME`` and implement ``run``."""

    NAME: ClassVar[str] = ""

    # -- documentation -------------------------------------------------------
    @classmethod
    def summary(cls) -> str:
        doc = inspect.getdoc(cls)
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def description(cls) -> str:
        return inspect.getdoc(cls) or ""

    @classmethod
    def option_fields(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    # -- construction from the command line ---------------------------------
    @classmethod
    def from_options(cls, options: dict[str, str]) -> SparsecompPass:
        """Instance from ``{kebab-name: text}``; :class:`PipelineError` on bad input."""
        hints = typing.get_type_hints(cls)
        fields = {kebab(f.name): f for f in cls.option_fields()}
        kwargs = {}
        for key, text in options.items():
            if key not in fields:
                valid = ", ".join(fields) or "none"
                raise PipelineError(f"pass '{cls.NAME}' has no option '{key}' (options: {valid})")
            field = fields[key]
            kwargs[field.name] = _convert(text, hints[field.name], key)
        try:
            return cls(**kwargs)
        except ValueError as exc:
            raise PipelineError(f"pass '{cls.NAME}': {exc}") from exc

    def pipeline_text(self) -> str:
        """``name{opt=value ...}`` with every option, for printing and cache keys."""
        opts = [f"{kebab(f.name)}={_quote(getattr(self, f.name))}" for f in self.option_fields()]
        return f"{self.NAME}{{{' '.join(opts)}}}" if opts else self.NAME

    # -- execution -----------------------------------------------------------
    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        raise NotImplementedError

    def __call__(self, op: ir.Operation, pass_: ExternalPass) -> None:
        """Verify ``op`` (:func:`~sparsecomp.ir.verify.verify`), then run the pass."""
        if not verify(op):
            pass_.signal_pass_failure()
            return
        self.run_verified(op, pass_)

    def run_verified(self, op: ir.Operation, pass_: ExternalPass) -> None:
        """Run the pass on ``op`` known to verify (``build_pass_manager`` verifies a
        pipeline's input once, at its first sparsecomp pass: the walk cost a third of
        a build's Python time when it ran before every pass); a bug in the pass is
        an error at ``op``, not a crash."""
        try:
            self.run(op, pass_)
        except SparsecompError as exc:  # the input's fault, said in the error: no traceback
            where = f" (at {exc.location})" if exc.location else ""
            hint = f"\n  hint: {exc.hint}" if exc.hint else ""
            op.location.emit_error(f"{self.NAME}: {exc.message}{where}{hint}")
            pass_.signal_pass_failure()
        except Exception:  # a bug in the pass: report it at the anchor, do not crash
            op.location.emit_error(
                f"internal error in pass '{self.NAME}':\n{traceback.format_exc()}"
            )
            pass_.signal_pass_failure()
