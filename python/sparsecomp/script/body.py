"""The scalar body of one statement: an expression tree as ``arith`` / ``math`` ops.

Built inside a ``linalg.generic`` region (:mod:`.emit`): tensor elements
are the region's arguments, scalar arguments are captured from the
function, index variables are ``linalg.index``. Numbers take the type of
the operand they meet (or the statement's element type); an index variable
meeting a number or element is converted to that type. Operands of two
different element types are refused (no implicit conversions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.dialects import arith, linalg, math

from sparsecomp.script.parse import MATH, Access, Const, Name, Node, Op, ScriptError
from sparsecomp.script.types import SCALARS

_FCMP = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}
_ICMP = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}


def is_float(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType)


def is_index(t: ir.Type) -> bool:
    return isinstance(t, ir.IndexType)


def constant(t: ir.Type, value: float | int) -> ir.Value:
    if is_float(t):
        return arith.constant(t, float(value))
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value} is not an integer")
    width = 64 if is_index(t) else ir.IntegerType(t).width
    low, high = (0, 1) if width == 1 else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    if not low <= int(value) <= high:  # would wrap: numpy refuses it too
        raise ValueError(f"{value} is out of range")
    return arith.constant(t, int(value))


def _fraction(e: Any) -> bool:
    """Whether ``e`` is a number with a fractional part (``0.5``, not ``2.0`` or ``2``)."""
    return isinstance(e, Const) and isinstance(e.value, float) and not e.value.is_integer()


def combine(reduce: str, acc: ir.Value, value: ir.Value) -> ir.Value:
    """``acc (reduce) value`` for a reduction: ``add``, ``mul``, ``max``, ``min``."""
    f = is_float(acc.type)
    ops: dict[str, Callable[..., ir.Value]] = {
        "add": arith.addf if f else arith.addi,
        "mul": arith.mulf if f else arith.muli,
        "max": arith.maximumf if f else arith.maxsi,
        "min": arith.minimumf if f else arith.minsi,
    }
    return ops[reduce](acc, value)


def identity(reduce: str, t: ir.Type) -> ir.Value:
    """The value a reduction starts from: 0, 1, -inf / the least int, +inf / the greatest."""
    if reduce in ("add", "mul"):
        return constant(t, 0 if reduce == "add" else 1)
    if is_float(t):
        return arith.constant(t, float("-inf") if reduce == "max" else float("inf"))
    bits = ir.IntegerType(t).width
    return arith.constant(t, -(2 ** (bits - 1)) if reduce == "max" else 2 ** (bits - 1) - 1)


class Body:
    """Emits one statement's expression; see the module."""

    def __init__(
        self,
        elements: dict[tuple[str, tuple[str, ...]], ir.Value],
        scalars: dict[str, ir.Value],
        loops: list[str],
        default: ir.Type,
        fail: Callable[..., ScriptError],
        loc: Callable[[Node], ir.Location],
    ) -> None:
        self.elements, self.scalars, self.loops = elements, scalars, loops
        self.default, self.fail, self.loc = default, fail, loc

    def emit(self, e: Any, want: ir.Type | None = None) -> ir.Value:
        with self.loc(e.at):
            if isinstance(e, Access):
                return self.elements[(e.tensor, e.indices)]
            if isinstance(e, Name):
                return self.name(e)
            if isinstance(e, Const):
                return self.number(e, want or self.default)
            return self.op(e, want)

    def name(self, e: Name) -> ir.Value:
        if e.name in self.scalars:
            return self.scalars[e.name]
        if e.name in self.loops:
            i64 = ir.IntegerType.get_signless(64)
            return linalg.IndexOp(ir.IntegerAttr.get(i64, self.loops.index(e.name))).result
        raise self.fail(e.at, f"'{e.name}' is not a scalar argument or an index variable")

    def number(self, e: Const, t: ir.Type) -> ir.Value:
        try:
            return constant(ir.IndexType.get() if is_index(t) else t, e.value)
        except ValueError:
            hint = "an index variable is an integer: convert it, f32(i)" if is_index(t) else None
            raise self.fail(e.at, f"{e.value} is not a value of type {t}", hint=hint) from None

    def pair(self, *args: Any) -> tuple[ir.Value, ir.Value]:
        """Both operands ``a, b`` (of an expected type ``want``), of one type (numbers
        and index variables adapt)."""
        a, b, want = args
        if isinstance(a, Const) and not isinstance(b, Const):
            y = self.emit(b, want)
            if is_index(y.type) and _fraction(a) and want is not None and is_float(want):
                y = self.convert(y, want)  # 0.5 * i: i as the statement's float type
            return self.emit(a, y.type), y
        x = self.emit(a, want)
        if is_index(x.type) and _fraction(b) and want is not None and is_float(want):
            x = self.convert(x, want)  # i - 0.5, likewise
        y = self.emit(b, x.type)
        if x.type == y.type:
            return x, y
        if is_index(x.type):
            return self.convert(x, y.type), y
        if is_index(y.type):
            return x, self.convert(y, x.type)
        raise self.fail(
            a.at,
            f"operands of types {x.type} and {y.type}",
            hint=f"convert one of them, as {x.type}(...) or {y.type}(...)",
        )

    def convert(self, v: ir.Value, t: ir.Type) -> ir.Value:
        """An index value as ``t`` (an integer or float type)."""
        wide = arith.index_cast(ir.IntegerType.get_signless(64), v)
        if is_float(t):
            return arith.sitofp(t, wide)
        return wide if ir.IntegerType(t).width == 64 else arith.trunci(t, wide)

    def op(self, e: Op, want: ir.Type | None) -> ir.Value:
        if e.op in ("+", "-", "*", "/"):
            x, y = self.pair(*e.args, want)
            f = is_float(x.type)
            table = {
                "+": (arith.addf, arith.addi),
                "-": (arith.subf, arith.subi),
                "*": (arith.mulf, arith.muli),
                "/": (arith.divf, arith.divsi),
            }
            return table[e.op][0 if f else 1](x, y)
        if e.op in _FCMP:
            x, y = self.pair(*e.args, None)
            if is_float(x.type):
                return arith.cmpf(getattr(arith.CmpFPredicate, _FCMP[e.op].upper()), x, y)
            return arith.cmpi(getattr(arith.CmpIPredicate, _ICMP[e.op]), x, y)
        if e.op == "where":
            cond = self.emit(e.args[0])
            if cond.type != ir.IntegerType.get_signless(1):
                raise self.fail(e.args[0].at, "a condition is a comparison")
            x, y = self.pair(e.args[1], e.args[2], want)
            return arith.select(cond, x, y)
        if e.op in ("max", "min"):
            return combine(e.op, *self.pair(*e.args, want))
        if e.op in SCALARS:
            return self.cast(self.emit(e.args[0]), ir.Type.parse(e.op), e)
        x = self.emit(e.args[0], want)
        return self.unary(e, x)

    def cast(self, x: ir.Value, t: ir.Type, e: Op) -> ir.Value:
        """``x`` converted to ``t`` (``f64(x)``): float widths, ints, and between them."""
        if x.type == t:
            return x
        if is_index(x.type):
            return self.convert(x, t)
        width = lambda ty: ir.FloatType(ty).width if is_float(ty) else ir.IntegerType(ty).width  # noqa: E731
        wider = width(t) > width(x.type)
        if is_float(x.type) and is_float(t):
            return arith.extf(t, x) if wider else arith.truncf(t, x)
        if is_float(x.type):
            return arith.fptosi(t, x)
        if is_float(t):
            return arith.sitofp(t, x)
        if ir.IntegerType(t).width == 1 or ir.IntegerType(x.type).width == 1:
            raise self.fail(e.at, "booleans do not convert: use where(c, 1, 0)")
        return arith.extsi(t, x) if wider else arith.trunci(t, x)

    def unary(self, e: Op, x: ir.Value) -> ir.Value:
        f = is_float(x.type)
        if e.op == "neg":
            return arith.negf(x) if f else arith.subi(constant(x.type, 0), x)
        if e.op == "abs":
            return math.absf(x) if f else math.absi(x)
        if not f:
            raise self.fail(e.at, f"{e.op} takes a floating-point value, got {x.type}")
        return getattr(math, MATH[e.op])(x)
