"""IR at any stage back to Python in the loop subset (:mod:`.loops`): the printer.

A ``func.func`` becomes a ``@loops`` function, one Python statement per
operation, in the operations' order:

* values are named as MLIR's own printer names them (``%dim`` -> ``dim``,
  ``%0`` -> ``v0``, ``%arg2`` -> ``arg2``); arguments and results are
  annotated with their MLIR types as text;
* ``scf.for`` is a ``for iv in range(lo, hi, step):`` loop. A loop-carried
  value is a Python variable bound before the loop (``acc = init``) and bound
  again in the body (``acc = acc + x``); after the loop it names the loop's
  result. ``scf.if`` is an ``if``/``else`` whose results are the variables
  both branches bind last;
* ``tensor.extract`` / ``memref.load`` are subscripts ``t[i, j]``;
  ``tensor.insert`` / ``memref.store`` are subscript assignments
  (``t[i] = v``; for a tensor, ``t`` is bound to the new tensor);
* arithmetic is Python's operators, comparisons, ``where``, ``max``/``min``,
  the math functions, ``index(x)`` / ``uindex(x)`` (index casts), constants
  typed by a call (``index(0)``, ``f32(1.5)``); the float ops' fast-math
  flags are the function's (``@loops(fastmath="reassoc,contract")``);
* an operand used once, by the next operations in order, is written inline
  (``acc + vals[p] * x[j]``), so that Python's order of evaluation is the
  operations' order;
* every other operation is ``op("dialect.name", operands..., types=[...],
  attrs={...}, regions=[...])``, its attributes as MLIR text and its regions
  as nested functions (one block each; their parameters are the block's
  arguments, and they end in the terminator, written as an ``op``).

Running the Python re-emits the module (:mod:`.loops_emit`); after
``sparsecomp-cleanup`` the text is the same. What cannot be said (a region
of several blocks, successors) raises :class:`~.printer.Unprintable`.
"""

from __future__ import annotations

import keyword
import math
import re
from typing import Any

from mlir import ir

from sparsecomp.script.printing import BUILTINS, Unprintable, bare, fail, quote

#: float ops written as operators / calls, whose fastmath flags are the function's
FLOAT_INFIX = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/"}
INT_INFIX = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}
BITS = {"arith.andi": "&", "arith.ori": "|", "arith.xori": "^"}
FLOAT_CALLS = {
    "arith.maximumf": "max",
    "arith.minimumf": "min",
    **{
        f"math.{f}": f for f in ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "absf")
    },
}
INT_CALLS = {"arith.maxsi": "max", "arith.minsi": "min"}
FCMP = {2: ">", 3: ">=", 4: "<", 5: "<=", 1: "==", 13: "!="}  # ogt oge olt ole oeq une
ICMP = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">="}  # eq ne slt sle sgt sge
NO_OVERFLOW = "#arith.overflow<none>"
NO_FASTMATH = "#arith.fastmath<none>"
#: names the subset gives a meaning to: values are never called so
RESERVED = {
    "op", "range", "index", "uindex", "dim", "where", "max", "min", "exp", "log", "sqrt",
    "rsqrt", "tanh", "erf", "sin", "cos", "absf", "loops", "kernel", "assemble", "MODULE",
    "f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "True", "False", "None",
}  # fmt: skip
SCALAR = re.compile(r"^(index|i1|i8|i16|i32|i64|f16|bf16|f32|f64)$")


def attributes(op: Any) -> dict[str, str]:
    """An op's attributes (inherent ones included): name -> MLIR text."""
    attrs = op.operation.attributes
    return {attrs[k].name: str(attrs[k].attr) for k in range(len(attrs))}


def _defining_block(value: Any) -> Any:
    owner = value.owner
    return owner if isinstance(owner, ir.Block) else owner.operation.block


class LoopFunction:
    """One ``func.func`` printed in the loop subset (see the module)."""

    def __init__(self, f: Any) -> None:
        self.f = f.operation
        self.state = ir.AsmState(self.f)
        self.names: dict[Any, str] = {}
        self.used: set[str] = set()
        self.fastmath = self._common_fastmath()

    # -- names ------------------------------------------------------------------------
    def name(self, value: Any) -> str:
        if value not in self.names:
            raw = value.get_name(self.state).lstrip("%").replace("#", "_")
            base = re.sub(r"\W", "_", raw)
            if not base or base[0].isdigit():
                base = f"v{base}"
            if keyword.iskeyword(base) or base in RESERVED:
                base += "_"
            name, k = base, 0
            while name in self.used:
                k += 1
                name = f"{base}_{k}"
            self.used.add(name)
            self.names[value] = name
        return self.names[value]

    def name_for_region(self) -> str:
        k = 0
        while f"region{k}" in self.used:
            k += 1
        self.used.add(f"region{k}")
        return f"region{k}"

    def _common_fastmath(self) -> str:
        found: dict[str, int] = {}
        for op in _walk(self.f):
            if op.name in FLOAT_INFIX or op.name in FLOAT_CALLS or op.name == "arith.negf":
                flags = attributes(op).get("fastmath", NO_FASTMATH)
                found[flags] = found.get(flags, 0) + 1
        return max(found, key=lambda k: found[k]) if found else NO_FASTMATH

    # -- the function -----------------------------------------------------------------
    def print(self) -> list[str]:
        f = self.f
        attrs = attributes(f)
        symbol = ir.StringAttr(f.attributes["sym_name"]).value
        name = python_name(symbol)
        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        entry = f.regions[0].blocks[0]
        if len(f.regions[0].blocks) != 1:
            raise fail(f, "a function of several blocks")
        params = [f"{self.name(a)}: {quote(str(a.type))}" for a in entry.arguments]
        results = [quote(str(t)) for t in ftype.results]
        ret = (
            "None"
            if not results
            else results[0]
            if len(results) == 1
            else f"({', '.join(results)})"
        )
        options = [f"name={quote(symbol)}"] if name != symbol else []
        if self.fastmath != NO_FASTMATH:
            options.append(f"fastmath={quote(self.fastmath[len('#arith.fastmath<') : -1])}")
        private = attrs.get("sym_visibility") == '"private"'
        if private:
            options.append("private=True")
        rest = {
            k: v
            for k, v in attrs.items()
            if k not in ("sym_name", "function_type") and not (k == "sym_visibility" and private)
        }
        if rest:
            options.append(f"attrs={_dict(rest)}")
        deco = f"@loops({', '.join(options)})" if options else "@loops"
        body = _Block(self, entry).lines(terminator="return")
        return [deco, f"def {name}({', '.join(params)}) -> {ret}:", *_indent(body)]


class _Block:
    """The statements of one block; ``pending`` holds the values not yet written,
    each used once by a later op, to be written inline there."""

    def __init__(self, fn: LoopFunction, block: Any) -> None:
        self.fn, self.block = fn, block
        self.out: list[str] = []
        self.pending: list[tuple[Any, str]] = []

    def lines(self, terminator: str, carried: list[str] | None = None) -> list[str]:
        """The block's statements. ``terminator``: ``return`` (func.return), ``carry``
        (scf.yield into the variables ``carried``) or ``op`` (generic)."""
        ops = list(self.block.operations)
        for op in ops[:-1]:
            self.op(op.operation)
        last = ops[-1].operation if ops else None
        if last is None:
            raise fail(self.fn.f, "a block without a terminator")
        if terminator == "return" and last.name == "func.return":
            texts = self.operands(list(last.operands))
            self.flush()
            self.out.append(f"return {', '.join(texts)}".rstrip())
        elif terminator == "carry" and last.name == "scf.yield":
            assert carried is not None
            self.carry(last, carried)
        else:
            self.op(last)
            self.flush()
        return self.out or ["pass"]

    def carry(self, yield_op: Any, carried: list[str]) -> None:
        values = list(yield_op.operands)
        texts = self.operands(values)
        self.flush()
        pairs = [
            (c, t)
            for c, t, v in zip(carried, texts, values, strict=True)
            if t != c or _is_block_argument_named(self.fn, v, c)
        ]
        if pairs:
            self.out.append(
                f"{', '.join(c for c, _ in pairs)} = {', '.join(bare(t) for _, t in pairs)}"
            )

    # -- pending values ------------------------------------------------------------------
    def flush(self) -> None:
        for value, text in self.pending:
            self.out.append(f"{self.fn.name(value)} = {bare(text)}")
        self.pending.clear()

    def operands(self, values: list[Any]) -> list[str]:
        """Texts of ``values`` (an op's operands), inlining the pending ones that the
        op alone uses, where they are the last pending, in operand order."""
        pending = [v for v, _ in self.pending]
        inline = [v for v in values if v in pending and _uses(v) == 1]
        if inline and pending[-len(inline) :] == inline:
            texts = dict(self.pending[-len(inline) :])
            del self.pending[-len(inline) :]
        else:
            texts = {}
            self.flush()
        return [texts.get(v) or self.fn.name(v) for v in values]

    def expression(self, op: Any, text: str) -> None:
        """``op``'s one result as ``text``: inline at its one use in this block, or named."""
        result = op.results[0]
        uses = [u.owner.operation for u in result.uses]
        if len(uses) == 1 and uses[0].block == self.block and uses[0].name != "scf.for":
            self.pending.append((result, text))
        else:
            self.flush()
            self.out.append(f"{self.fn.name(result)} = {bare(text)}")

    def statement(self, text: str) -> None:
        self.flush()
        self.out.append(text)

    # -- ops -------------------------------------------------------------------------------
    def op(self, op: Any) -> None:
        if op.successors:
            raise fail(op, "an op with successors (unstructured control flow)")
        if not self.sugar(op):
            self.generic(op)

    def sugar(self, op: Any) -> bool:
        n = op.name
        attrs = attributes(op)
        fm = attrs.get("fastmath")
        if n == "arith.constant":
            text = _constant(op)
            if text is None:
                return False
            self.statement(f"{self.fn.name(op.result)} = {text}")
            return True
        if n == "scf.for":
            self.loop(op, attrs)
            return True
        if n == "scf.if" and not attrs:
            self.branch(op)
            return True
        if n in ("tensor.extract", "memref.load") and not attrs:
            t, *idx = self.operands(list(op.operands))
            self.expression(op, f"{t}[{_subscript(idx)}]")
            return True
        if n == "memref.store" and not attrs:
            v, m, *idx = self.operands(list(op.operands))
            self.statement(f"{m}[{_subscript(idx)}] = {bare(v)}")
            return True
        if n == "tensor.insert" and not attrs and self.rebinds(op):
            v, t, *idx = self.operands(list(op.operands))
            self.fn.names[op.result] = t
            self.statement(f"{t}[{_subscript(idx)}] = {bare(v)}")
            return True
        if n in ("tensor.dim", "memref.dim") and not attrs:
            t, d = self.operands(list(op.operands))
            self.expression(op, f"dim({t}, {d})")
            return True
        if len(op.results) != 1:
            return False
        if n in FLOAT_INFIX and fm == self.fn.fastmath and len(attrs) == 1:
            a, b = self.operands(list(op.operands))
            self.expression(op, f"({a} {FLOAT_INFIX[n]} {b})")
            return True
        if n == "arith.negf" and fm == self.fn.fastmath and len(attrs) == 1:
            (a,) = self.operands(list(op.operands))
            self.expression(op, f"(-{a})")
            return True
        if n in INT_INFIX and attrs == {"overflowFlags": NO_OVERFLOW}:
            a, b = self.operands(list(op.operands))
            self.expression(op, f"({a} {INT_INFIX[n]} {b})")
            return True
        if n in BITS and not attrs:
            a, b = self.operands(list(op.operands))
            self.expression(op, f"({a} {BITS[n]} {b})")
            return True
        if n in FLOAT_CALLS and fm == self.fn.fastmath and len(attrs) == 1:
            args = self.operands(list(op.operands))
            self.expression(op, f"{FLOAT_CALLS[n]}({', '.join(map(bare, args))})")
            return True
        if (n in INT_CALLS and not attrs) or (n == "arith.select" and not attrs):
            name = INT_CALLS.get(n, "where")
            args = self.operands(list(op.operands))
            self.expression(op, f"{name}({', '.join(map(bare, args))})")
            return True
        if n in ("arith.index_cast", "arith.index_castui") and not attrs:
            if str(op.results[0].type) != "index":
                return False
            (a,) = self.operands(list(op.operands))
            self.expression(op, f"{'u' if n.endswith('ui') else ''}index({bare(a)})")
            return True
        scalar = not isinstance(op.operands[0].type, ir.ShapedType) if op.operands else False
        if n == "arith.cmpf" and scalar and attrs.get("fastmath") == NO_FASTMATH:
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            if pred in FCMP and len(attrs) == 2:
                a, b = self.operands(list(op.operands))
                self.expression(op, f"({a} {FCMP[pred]} {b})")
                return True
        if n == "arith.cmpi" and scalar and len(attrs) == 1:
            pred = ir.IntegerAttr(op.attributes["predicate"]).value
            if pred in ICMP:
                a, b = self.operands(list(op.operands))
                self.expression(op, f"({a} {ICMP[pred]} {b})")
                return True
        return False

    def rebinds(self, op: Any) -> bool:
        """``t[i] = v`` may stand for ``tensor.insert``: its destination is named
        in this block and used by nothing else, so its name can pass to the result."""
        dest = op.operands[1]
        pending = [v for v, _ in self.pending]
        return _uses(dest) == 1 and _defining_block(dest) == self.block and dest not in pending

    def loop(self, op: Any, attrs: dict[str, str]) -> None:
        lo, hi, step, *inits = list(op.operands)
        texts = self.operands([lo, hi, step, *inits])
        body = op.regions[0].blocks[0]
        iv, *args = list(body.arguments)
        carried = [self.fn.name(a) for a in args]
        self.flush()
        if carried:
            self.out.append(f"{', '.join(carried)} = {', '.join(map(bare, texts[3:]))}")
        bounds = texts[:3] if _is_one(step) is False else texts[:2]
        if attrs:
            bounds.append(f"attrs={_dict(attrs)}")
        self.out.append(f"for {self.fn.name(iv)} in range({', '.join(map(bare, bounds))}):")
        inner = _Block(self.fn, body).lines(terminator="carry", carried=carried)
        self.out.extend(_indent(inner))
        for r, c in zip(op.results, carried, strict=True):
            self.fn.names[r] = c

    def branch(self, op: Any) -> None:
        (cond,) = self.operands([op.operands[0]])
        self.flush()
        results = [self.fn.name(r) for r in op.results]
        self.out.append(f"if {bare(cond)}:")
        then, other = op.regions
        self.out.extend(_indent(_Block(self.fn, then.blocks[0]).lines("carry", results)))
        if len(other.blocks):
            self.out.append("else:")
            self.out.extend(_indent(_Block(self.fn, other.blocks[0]).lines("carry", results)))

    def generic(self, op: Any) -> None:
        texts = self.operands(list(op.operands))
        self.flush()
        regions = []
        for region in op.regions:
            blocks = list(region.blocks)
            if not blocks:
                regions.append("None")
                continue
            if len(blocks) > 1:
                raise fail(op, "a region of several blocks")
            name = self.fn.name_for_region()
            params = [f"{self.fn.name(a)}: {quote(str(a.type))}" for a in blocks[0].arguments]
            inner = _Block(self.fn, blocks[0]).lines(terminator="op")
            self.out.append(f"def {name}({', '.join(params)}):")
            self.out.extend(_indent(inner))
            regions.append(name)
        args = [quote(op.name), *map(bare, texts)]
        if op.results:
            args.append(f"types=[{', '.join(quote(str(r.type)) for r in op.results)}]")
        attrs = attributes(op)
        if attrs:
            args.append(f"attrs={_dict(attrs)}")
        if regions:
            args.append(f"regions=[{', '.join(regions)}]")
        call = f"op({', '.join(args)})"
        if not op.results:
            self.out.append(call)
        else:
            names = ", ".join(self.fn.name(r) for r in op.results)
            self.out.append(f"{names} = {call}")


def _subscript(indices: list[str]) -> str:
    """The subscript of an element access: ``i, j``; ``()`` for a 0-d tensor's only
    element (``t[]`` is no Python)."""
    return ", ".join(map(bare, indices)) if indices else "()"


def python_name(symbol: str) -> str:
    """A Python name for the function ``symbol`` (itself where it is one the
    subset leaves free; ``@loops(name=...)`` keeps the symbol otherwise)."""
    name = re.sub(r"\W", "_", symbol)
    if not name.isidentifier() or name[0].isdigit():
        name = f"f_{name}"
    if keyword.iskeyword(name) or name in RESERVED or name in BUILTINS:
        name += "_"
    return name


def _is_block_argument_named(fn: LoopFunction, value: Any, name: str) -> bool:
    """A carried block argument yielded unchanged (``acc = acc``, said explicitly)."""
    return isinstance(value.owner, ir.Block) and fn.names.get(value) == name


def _uses(value: Any) -> int:
    return sum(1 for _ in value.uses)


def _is_one(value: Any) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return False
    attr = owner.operation.attributes["value"]
    return isinstance(attr, ir.IntegerAttr) and ir.IntegerAttr(attr).value == 1


def _constant(op: Any) -> str | None:
    """A scalar constant as ``type(value)``, or None (vectors, odd floats...)."""
    attrs = attributes(op)
    t = str(op.results[0].type)
    if len(attrs) != 1 or not SCALAR.match(t):
        return None
    attr = op.attributes["value"]
    if t == "i1":
        return f"i1({ir.IntegerAttr(attr).value != 0})"
    if t.startswith(("f", "bf")):
        x = ir.FloatAttr(attr).value
        if not math.isfinite(x) or (x == 0 and math.copysign(1, x) < 0):
            return None
        return f"{t}({x!r})"
    return f"{t}({ir.IntegerAttr(attr).value})"


def _walk(op: Any) -> list[Any]:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for o in block.operations:
                found.append(o.operation)
                found.extend(_walk(o.operation))
    return found


def _dict(attrs: dict[str, str]) -> str:
    return "{" + ", ".join(f"{quote(k)}: {quote(v)}" for k, v in attrs.items()) + "}"


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]


def print_function(f: Any) -> str:
    """``f`` (a ``func.func`` with a body) as a ``@loops`` function."""
    return "\n".join(LoopFunction(f).print()) + "\n"


def print_top(op: Any, name: str) -> str:
    """A module-level op other than a function with a body (a declaration, a
    global) as ``name = op(...)``: no operands, no results, empty regions."""
    op = op.operation
    if op.operands or op.results:
        raise fail(op, "a module-level op with operands or results")
    regions = []
    for region in op.regions:
        if len(region.blocks):
            raise fail(op, "a module-level op whose region is not empty")
        regions.append("None")
    args = [quote(op.name)]
    attrs = attributes(op)
    if attrs:
        args.append(f"attrs={_dict(attrs)}")
    if regions:
        args.append(f"regions=[{', '.join(regions)}]")
    return f"{name} = op({', '.join(args)})\n"


__all__ = ["LoopFunction", "Unprintable", "print_function", "print_top"]
