"""IR back to Python: :func:`to_python` prints a module in the kernel subsets.

Each ``func.func`` that is stage I as the index-notation subset writes it
becomes a ``@kernel`` function (``private=True`` and its attributes as MLIR
text where it has them): its arguments annotated with their types
(``Tensor[f32, (SIZE...), "encoding"]``, a dynamic size as a symbol of its
own), each ``linalg.generic`` a statement of index notation, each
``func.call`` a call, ``return`` a return. Any other function, at any
stage, is printed as a ``@loops`` function (:mod:`.loops_printer`), and
other module-level ops (declarations, globals) as ``op(...)``. The last
line, ``MODULE = assemble(...)``, puts them in one module as they were (with
the module's attributes). Running the printed Python re-emits the module
(:mod:`.emit`, :mod:`.loops_emit`): after ``sparsecomp-cleanup`` the text is
the same (the round trip is tested on every example and lit input, as
written and at stage II: test/python/script_corpus.py).

What the index notation cannot say (an input the body never reads, loops
ordered otherwise than the emitter orders them, a body op outside the
subset...) makes the function a ``@loops`` one; what neither subset can say
(a function of several blocks, an op with successors) is refused with
:class:`Unprintable` naming the op and the reason. Named ops
(``linalg.matmul``) are written in index notation after
``linalg-generalize-named-ops``.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
from typing import Any

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.script.loops_printer import print_function, print_top, python_name
from sparsecomp.script.printing import BUILTINS, Unprintable, bare, fail, quote
from sparsecomp.script.types import SCALARS

#: body ops printed as infix operators
INFIX = {
    "arith.addf": "+", "arith.addi": "+", "arith.subf": "-", "arith.subi": "-",
    "arith.mulf": "*", "arith.muli": "*", "arith.divf": "/", "arith.divsi": "/",
}  # fmt: skip
#: reductions: the combining op of ``out (op) value``
REDUCTIONS = {
    "arith.addf": "+=", "arith.addi": "+=", "arith.mulf": "*=", "arith.muli": "*=",
    "arith.maximumf": "max", "arith.maxsi": "max", "arith.minimumf": "min", "arith.minsi": "min",
}  # fmt: skip
CALLS = {
    "arith.maximumf": "max", "arith.maxsi": "max", "arith.minimumf": "min", "arith.minsi": "min",
    "math.absf": "abs", "math.absi": "abs", "arith.select": "where",
    **{f"math.{f}": f for f in ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos")},
}  # fmt: skip
CONVERSIONS = (
    "arith.extf",
    "arith.truncf",
    "arith.sitofp",
    "arith.fptosi",
    "arith.extsi",
    "arith.trunci",
)
COMPARE = {
    "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=", "oeq": "==", "une": "!=",
    "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=", "eq": "==", "ne": "!=",
}  # fmt: skip
FPRED = [
    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
    "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true",
]  # fmt: skip
IPRED = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
LOOPS = "ijklpqrstuvw"


class _Function:
    def __init__(self, f: Any) -> None:
        self.f = f
        self.names: dict[Any, str] = {}
        self.lines: list[str] = []
        self.fills: dict[Any, tuple[Any, Any]] = {}  # fill result -> (value, empty)
        self.empties: dict[Any, Any] = {}  # empty result -> op
        self.decls: list[str] = []
        self.count = 0

    def name(self, value: Any) -> str:
        if value not in self.names:
            owner = _producer(value)
            raise fail(owner or self.f, "a use of a value the subset has no name for")
        return self.names[value]

    def fresh(self, value: Any, prefix: str = "t") -> str:
        self.count += 1
        self.names[value] = f"{prefix}{self.count}"
        return self.names[value]

    def print(self) -> str:
        f = self.f
        args = []
        entry = f.regions[0].blocks[0]
        for k, arg in enumerate(entry.arguments):
            self.names[arg] = f"a{k}"
            args.append(f"a{k}: {self.annotation(arg.type, f'a{k}')}")
        for op in entry.operations:
            self.op(op)
        name = ir.StringAttr(f.attributes["sym_name"]).value
        if not name.isidentifier() or keyword.iskeyword(name) or name in BUILTINS:
            raise fail(f, f"'{name}' is not a Python name the subset leaves free")
        head = f"{self.decorator()}\ndef {name}({', '.join(args)}):"
        return "\n".join([head, *[f"    {line}" for line in self.lines]]) + "\n"

    def decorator(self) -> str:
        """``@kernel``, with ``private=True`` and the function's other attributes."""
        options = []
        if "sym_visibility" in self.f.attributes:
            options.append("private=True")
        attrs = {
            k: v
            for k, v in _attributes(self.f).items()
            if k not in ("sym_name", "function_type", "sym_visibility")
        }
        if "arg_attrs" in attrs or "res_attrs" in attrs:
            raise fail(self.f, "argument or result attributes")
        if attrs:
            items = ", ".join(f"{quote(k)}: {quote(v)}" for k, v in attrs.items())
            options.append(f"attributes={{{items}}}")
        return f"@kernel({', '.join(options)})" if options else "@kernel"

    def size_arguments(self, empty: Any) -> dict[int, str]:
        """The dimensions of a ``tensor.empty`` sized by function arguments: dim -> name."""
        t = ir.RankedTensorType(empty.result.type)
        dynamic = [d for d, n in enumerate(t.shape) if ir.ShapedType.is_dynamic_size(n)]
        out = {}
        for d, v in zip(dynamic, empty.operands, strict=True):
            if _producer(v) is None and v in self.names:
                out[d] = self.names[v]
            elif _producer(v) is None or _producer(v).name != "tensor.dim":
                raise fail(empty, "a size neither an argument nor a dimension of a tensor")
        return out

    def annotation(self, t: Any, owner: str, sized: dict[int, str] | None = None) -> str:
        if not isinstance(t, ir.RankedTensorType):
            if str(t) not in SCALARS:
                raise fail(self.f, f"an argument of type {t}")
            return str(t)
        t = ir.RankedTensorType(t)
        if str(t.element_type) not in SCALARS:  # bf16: numpy has no such type
            raise fail(self.f, f"a tensor of {t.element_type}, which has no script type")
        sized = sized or {}
        dims = [
            f'"{sized[d]}"'
            if d in sized
            else f'"{owner}_{d}"'
            if ir.ShapedType.is_dynamic_size(s)
            else str(s)
            for d, s in enumerate(t.shape)
        ]
        shape = f"({', '.join(dims)},)" if len(dims) == 1 else f"({', '.join(dims)})"
        enc = f", {quote(str(t.encoding))}" if t.encoding is not None else ""
        return f"Tensor[{t.element_type}, {shape}{enc}]"

    def op(self, op: Any) -> None:
        op = op.operation
        n = op.name
        if n in ("arith.constant", "tensor.dim"):
            return  # re-made where the statements need them
        if n == "tensor.empty":
            self.empties[op.result] = op
            return
        if n == "linalg.fill":
            self.fills[op.results[0]] = (op.operands[0], op.operands[1])
            return
        if n == "linalg.generic" and _is_fill(op):
            self.fills[op.results[0]] = (op.operands[0], op.operands[1])
            return
        if n == "linalg.generic":
            self.generic(op)
            return
        if n == "func.call":
            self.call(op)
            return
        if n == "func.return":
            if not op.operands:
                raise fail(self.f, "a kernel returns at least one tensor")
            if any(isinstance(v.owner, ir.Block) for v in op.operands):
                raise fail(op, "a kernel returns what it computes, not an argument")
            self.lines.append(f"return {', '.join(self.name(v) for v in op.operands)}")
            return
        if n.startswith("linalg."):
            raise fail(op, "a named op: print after linalg-generalize-named-ops")
        raise fail(op, "not a stage-I op of the subset")

    def call(self, op: Any) -> None:
        outs = [self.fresh(r) for r in op.results]
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        args = ", ".join(self.name(v) for v in op.operands)
        self.lines.append(f"{', '.join(outs)} = {callee}({args})")

    def generic(self, op: Any) -> None:
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        kinds = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        outs = list(op.regions[0].blocks[0].arguments)
        n_in = len(op.operands) - 1
        if len(op.results) != 1:
            raise fail(op, "one result per statement")
        if op.operands[n_in] in list(op.operands)[:n_in]:
            raise fail(op, "the output is an input too")
        loops = self.loop_names(op, maps[-1], kinds)
        block = op.regions[0].blocks[0]
        out_arg = outs[-1]
        init = op.operands[n_in]
        target_idx = [loops[_dim(e)] for e in maps[-1].results]
        yield_op = list(block.operations)[-1]
        body = _Body(self, op, block, maps, loops, n_in)
        value = yield_op.operands[0]
        reduce = None
        if kinds.count("#linalg.iterator_type<reduction>") or self.combines(value, out_arg):
            reduce, value = self.reduction(op, value, out_arg)
        expr = bare(body.expr(value))
        body.check_order()
        target = self.target(op, init, reduce)
        lhs = f"{target}[{', '.join(target_idx)}]" if target_idx else target
        if reduce in ("max", "min"):
            self.lines.append(f"{lhs} = {reduce}({lhs}, {expr})")
        elif reduce is not None and target_idx:
            self.lines.append(f"{lhs} {reduce} {expr}")
        elif reduce is not None:
            self.lines.append(f"{target} {reduce} {expr}")
        elif target_idx:
            self.lines.append(f"{lhs} = {expr}")
        else:
            raise fail(op, "a 0-d result assigned without a reduction")
        self.names[op.results[0]] = target

    def loop_names(self, op: Any, out_map: Any, kinds: list[str]) -> list[str]:
        """The loops' names; the emitter orders the output's loops first, in order."""
        dims = [_dim(e) for e in out_map.results]
        if dims != list(range(len(dims))):
            raise fail(op, "the output's loops are not the first ones, in order")
        if any("reduction" in k for k in kinds[: len(dims)]) or any(
            "parallel" in k for k in kinds[len(dims) :]
        ):
            raise fail(op, "a parallel loop the output does not index")
        return [LOOPS[d] if d < len(LOOPS) else f"i{d}" for d in range(len(kinds))]

    def combines(self, value: Any, out_arg: Any) -> bool:
        owner = _producer(value)
        return (
            owner is not None
            and owner.name in REDUCTIONS
            and any(o == out_arg for o in owner.operands)
        )

    def reduction(self, op: Any, value: Any, out_arg: Any) -> tuple[str, Any]:
        owner = _producer(value)
        if owner is None or owner.name not in REDUCTIONS:
            raise fail(op, "a reduction's body ends in out (+, *, max, min) value")
        a, b = owner.operands
        if a != out_arg:
            raise fail(op, "the reduction combines out first (out + value)")
        return REDUCTIONS[owner.name], b

    def target(self, op: Any, init: Any, reduce: str | None) -> str:
        """The name the result takes: the init's tensor where it is one (an argument
        or an earlier result), else a new one (declared where it is sparse)."""
        if init in self.fills:
            value, empty = self.fills[init]
            if reduce is None:
                raise fail(op, "a fill before an assignment")
            if not _is_identity(value, reduce):
                raise fail(op, f"the fill is not the identity of the reduction '{reduce}'")
            init = empty
            if empty not in self.empties:
                raise fail(op, "a fill of something other than tensor.empty")
        if init in self.empties:
            name = self.fresh(op.results[0])
            t = ir.RankedTensorType(init.type)
            first = ir.RankedTensorType(op.operands[0].type).element_type if op.operands else None
            sized = self.size_arguments(self.empties[init])
            if t.encoding is not None or first != t.element_type or sized:
                self.lines.append(f"{name}: {self.annotation(t, name, sized)}")
            elif reduce is not None and init not in {e for _, e in self.fills.values()}:
                raise fail(op, "a dense reduction into tensor.empty (no fill)")
            return name
        if init in self.names:
            return self.name(init)
        raise fail(op, "the init is neither tensor.empty, a fill of it, nor a named tensor")


class _Body:
    """One generic's body as an expression."""

    def __init__(
        self, fn: _Function, op: Any, block: Any, maps: list[Any], loops: list[str], n_in: int
    ):
        self.fn, self.op, self.maps, self.loops = fn, op, maps, loops
        self.args = list(block.arguments)
        self.n_in = n_in
        self.read: list[int] = []  # inputs in the order the expression reads them

    def access(self, k: int) -> str:
        idx = ", ".join(self.loops[_dim(e)] for e in self.maps[k].results)
        if k == self.n_in:
            target = self.fn.names.get(self.op.operands[k])
            if target is None:
                raise fail(self.op, "the body reads a new output")
            return f"{target}[{idx}]" if idx else target
        if k not in self.read:
            self.read.append(k)
        return f"{self.fn.name(self.op.operands[k])}[{idx}]"

    def check_order(self) -> None:
        if self.read != list(range(self.n_in)):
            raise fail(
                self.op, f"the body reads its inputs in the order {self.read}, not as listed"
            )

    def expr(self, v: Any) -> str:
        for k, arg in enumerate(self.args):
            if v == arg:
                return self.access(k)
        owner = _producer(v)
        if owner is None:
            if v in self.fn.names:
                return self.fn.name(v)  # a scalar argument
            raise fail(self.op, "a block argument of another region")
        return self.operation(owner)

    def operation(self, o: Any) -> str:
        o = o.operation
        n = o.name
        if n == "arith.constant":
            return _number(o)
        if n in INFIX:
            a, b = (self.expr(x) for x in o.operands)
            return f"({a} {INFIX[n]} {b})"
        if n in ("arith.negf",):
            return f"(-{self.expr(o.operands[0])})"
        if n in ("arith.cmpf", "arith.cmpi"):
            pred = ir.IntegerAttr(o.attributes["predicate"]).value
            name = (FPRED if n == "arith.cmpf" else IPRED)[pred]
            if name not in COMPARE:
                raise fail(o, f"comparison '{name}'")
            a, b = (self.expr(x) for x in o.operands)
            return f"({a} {COMPARE[name]} {b})"
        if n in CALLS:
            return f"{CALLS[n]}({', '.join(bare(self.expr(x)) for x in o.operands)})"
        if n in CONVERSIONS:
            return f"{o.results[0].type}({bare(self.expr(o.operands[0]))})"
        if n == "linalg.index":
            return self.loops[ir.IntegerAttr(o.attributes["dim"]).value]
        raise fail(o, "not an op of the subset")


def _producer(value: Any) -> Any:
    """The operation defining ``value`` (None for a block argument)."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _is_fill(op: Any) -> bool:
    """A generalized ``linalg.fill``: a scalar input yielded into every element."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    return (
        len(op.operands) == 2
        and not isinstance(op.operands[0].type, ir.ShapedType)
        and len(body) == 1
        and body[0].operands[0] == block.arguments[0]
    )


def _dim(e: Any) -> int:
    return ir.AffineDimExpr(e).position


def _attributes(op: Any) -> dict[str, str]:
    """An op's attributes: name -> MLIR text."""
    attrs = op.operation.attributes
    named = [attrs[k] for k in range(len(attrs))]
    return {a.name: str(a.attr) for a in named}


def _number(o: Any) -> str:
    attr = o.attributes["value"]
    if isinstance(attr.type, ir.FloatType):
        return repr(ir.FloatAttr(attr).value)
    return str(ir.IntegerAttr(attr).value)


def _is_identity(value: Any, reduce: str) -> bool:
    owner = _producer(value)
    if owner is None or owner.name != "arith.constant":
        return False
    x = float(_number(owner))
    return {"+=": x == 0, "*=": x == 1, "max": x == float("-inf"), "min": x == float("inf")}.get(
        reduce, False
    ) or (reduce in ("max", "min") and abs(x) >= 2**31 - 1)


def to_python(module: Any, *, check: bool = True) -> str:
    """``module`` (text or ``ir.Module``, in a context with sparse_iter) as Python:
    each function as a ``@kernel`` in index notation where it is stage I as that
    subset writes it, else as a ``@loops`` function (:mod:`.loops_printer`), and
    other module-level ops (declarations, globals) as ``op(...)``. Raises
    :class:`Unprintable` (the op and why) for what neither subset can say.

    ``check``: run the Python, and print as ``@loops`` the functions whose
    ``@kernel`` does not re-emit them (as MLIR's printer falls back to the
    generic form): the Python always re-emits the module."""
    from sparsecomp.ir.context import make_context

    if isinstance(module, str):
        with make_context():
            return to_python(ir.Module.parse(module), check=check)
    text, kernels = _print(module, set())
    if check and kernels:
        wrong = _not_re_emitted(module, text, kernels)
        if wrong:
            text, _ = _print(module, wrong)
    return text


def _print(module: Any, as_loops: set[str]) -> tuple[str, set[str]]:
    """The Python of ``module`` (the functions named in ``as_loops`` as ``@loops``)
    and the functions it prints as ``@kernel``."""
    parts = ["from sparsecomp.script import *\n"]
    names: list[str] = []
    kernels: set[str] = set()
    for k, op in enumerate(module.body.operations):
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks:
            symbol = ir.StringAttr(op.attributes["sym_name"]).value
            try:
                if symbol in as_loops:
                    raise fail(op, "its @kernel does not re-emit it")
                if any(c not in kernels for c in _callees(op)):
                    raise fail(op, "a call of a function not printed as a @kernel above")
                parts.append(_Function(op).print())
                kernels.add(symbol)
                name = symbol
            except Unprintable:
                parts.append(print_function(op))
                name = python_name(symbol)
        else:
            sym = op.attributes["sym_name"] if "sym_name" in op.attributes else None
            name = python_name(ir.StringAttr(sym).value) if sym is not None else f"top{k}"
            if name in names:
                name = f"top{k}"
            parts.append(print_top(op, name))
        names.append(name)
    attrs = _attributes(module.operation)
    extra = ""
    if attrs:
        items = ", ".join(f"{quote(k)}: {quote(v)}" for k, v in attrs.items())
        extra = f", attributes={{{items}}}"
    items = ", ".join([*names, extra[2:]] if extra else names)
    parts.append(f"MODULE = assemble({items})\n")
    return "\n\n".join(parts), kernels


_RUNS = itertools.count()


def _not_re_emitted(module: Any, text: str, kernels: set[str]) -> set[str]:
    """The functions among ``kernels`` that the Python ``text`` does not re-emit
    (all of them where it does not run), compared generalized and cleaned up."""
    filename = f"<sparsecomp.script.to_python-{next(_RUNS)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    try:
        scope: dict[str, Any] = {"__name__": "sparsecomp_printed"}
        exec(compile(text, filename, "exec"), scope)  # the printer's own output
        again = _cleaned(str(scope["MODULE"]))
    except SparsecompError:
        return set(kernels)
    finally:
        linecache.cache.pop(filename, None)
    before = _cleaned(str(module))
    return {k for k in kernels if before.get(k) != again.get(k)}


def _cleaned(text: str) -> dict[str, str]:
    """Each function's text after ``sparsecomp-cleanup`` (by symbol), without the names
    a kernel gives its sizes (:data:`~sparsecomp.lowering.sizes.NAMES`: the printer
    makes up its own)."""
    from mlir import passmanager

    from sparsecomp.ir.context import make_context
    from sparsecomp.lowering.sizes import drop_names

    with make_context():
        module = ir.Module.parse(text)
        pipeline = "builtin.module(linalg-generalize-named-ops,canonicalize,cse)"
        passmanager.PassManager.parse(pipeline).run(module.operation)
        drop_names(module.operation)
        return {
            ir.StringAttr(op.attributes["sym_name"]).value: str(op)
            for op in module.body.operations
            if op.operation.name == "func.func"
        }


def _callees(f: Any) -> list[str]:
    """The functions ``f`` calls (at its top level, as the kernel subset would)."""
    return [
        ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        for op in f.regions[0].blocks[0].operations
        if op.operation.name == "func.call"
    ]
