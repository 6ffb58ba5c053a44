"""A Python kernel's source, read into statements of index notation.

The subset (docs/script.md has the table):

* ``T[i, j] = expr``: each element of ``T`` over the index variables on the
  left; ``T[i] += expr`` (``*=``) sums (multiplies) over the index
  variables that appear only on the right; ``T[i] = max(T[i], expr)``
  (``min``; ``s = max(s, expr)`` for a 0-d ``s``) reduces with ``max``
  (``min``); ``s += expr`` reduces everything into a 0-d result ``s``;
* ``X = other(A, B)`` (``X, Y = ...``): a call of another ``@kernel``;
* ``E: Tensor[f32, ("M", "N"), "csr"]``: the type of a result computed
  below (its element type, sizes and encoding; a result is dense otherwise);
* ``return T`` / ``return T, U``; a docstring.

In an expression: tensor elements ``A[i, k]`` (subscripts are index
variables), scalar arguments, numbers (and names of Python numbers the
function sees, such as a module's ``ALPHA = 0.5``), index variables (their
value, an integer), ``+ - * /``, unary ``-``, comparisons (one operator), ``a if c
else b`` and ``where(c, a, b)``, ``max(a, b)``, ``min(a, b)``, ``abs``, the
functions in :data:`MATH`, and conversions named by element type
(``f64(x)``, ``i32(x)``).

Anything else is refused with a :class:`ScriptError` at its line.
"""

from __future__ import annotations
import __future__

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.script.types import SCALARS, Scalar, TensorType

#: The code flag of a function compiled under ``from __future__ import annotations``.
_FUTURE_ANNOTATIONS = __future__.annotations.compiler_flag

#: one-argument math functions: name -> math dialect op name
MATH = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "tanh": "tanh",
    "erf": "erf",
    "sin": "sin",
    "cos": "cos",
}
BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
AUGMENTED = {ast.Add: "add", ast.Mult: "mul"}
SUBSET = (
    "statements T[i, j] = expr, T[i] += expr, T[i] *= expr, T[i] = max(T[i], expr), "
    "X = other_kernel(...), E: Tensor[...], return; expressions of tensor elements A[i, k], scalar "
    "arguments, numbers, index variables, + - * /, comparisons, a if c else b, "
    f"where, max, min, abs, {', '.join(MATH)}; conversions {', '.join(SCALARS)}(x)"
)


class ScriptError(SparsecompError):
    """A kernel's Python is outside the subset, or inconsistent; located at its line."""


@dataclass(frozen=True)
class TypeVariable:
    """A scalar argument's type variable (``alpha: "T"``)."""

    name: str


@dataclass(frozen=True)
class Node:
    """Where an expression or statement is in the Python source."""

    line: int
    col: int


def _returns_0d(d: Any, k: int) -> bool:
    """Whether kernel definition ``d``'s result ``k`` is 0-d: so declared, or, undeclared,
    last assigned by a statement with no indices (``s += ...``) or a call's 0-d result."""
    results = d.results or []
    if k < len(results) and isinstance(results[k], TensorType):
        return bool(results[k].rank == 0)
    name = d.returns[k] if k < len(d.returns) else None
    found = False
    for s in d.body:
        if isinstance(s, Statement) and s.target == name:
            found = not s.indices
        elif isinstance(s, Call) and name in s.targets:
            inner = getattr(s.kernel, "definition", None)
            found = inner is not None and _returns_0d(inner, s.targets.index(name))
    return found


def _is_plain_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _reads_a_tensor(e: Any) -> bool:
    """Whether expression ``e`` reads an element of a tensor (a 0-d one among them)."""
    if isinstance(e, Access):
        return True
    return isinstance(e, Op) and any(_reads_a_tensor(a) for a in e.args)


@dataclass(frozen=True)
class Access:
    tensor: str
    indices: tuple[str, ...]
    at: Node


@dataclass(frozen=True)
class Const:
    value: float | int
    at: Node


@dataclass(frozen=True)
class Name:
    """A scalar argument or an index variable."""

    name: str
    at: Node


@dataclass(frozen=True)
class Op:
    """An operator or function: ``op`` is ``+``, ``neg``, ``<``, ``where``, ``exp``..."""

    op: str
    args: tuple[Any, ...]
    at: Node


@dataclass(frozen=True)
class Statement:
    """``target[indices] (reduce)= value``; ``reduce`` is None for a plain ``=``."""

    target: str
    indices: tuple[str, ...]
    reduce: str | None
    value: Any
    at: Node


@dataclass(frozen=True)
class Call:
    """``targets = kernel(args)``: ``kernel`` is the called ``Kernel`` object; ``args``
    in its parameter order, each a name or (a number written, or the callee's
    default) a :class:`Const`."""

    targets: tuple[str, ...]
    kernel: Any
    args: tuple[str | Const, ...]
    at: Node


@dataclass
class Definition:
    """A parsed kernel: its name, arguments, results and statements."""

    name: str
    filename: str
    params: dict[str, TensorType | Scalar | str]
    results: list[TensorType | None]
    at: Node = Node(1, 1)  # the ``def`` line
    declared: dict[str, TensorType] = field(default_factory=dict)  # ``E: Tensor[...]``
    attributes: dict[str, str] = field(default_factory=dict)  # the function's, as MLIR text
    body: list[Statement | Call] = field(default_factory=list)
    returns: tuple[str, ...] = ()


class _Reader:
    def __init__(self, fn: Any, filename: str, first_line: int, indent: int) -> None:
        self.fn, self.filename, self.first, self.indent = fn, filename, first_line, indent
        self.params: set[str] = set()
        self.zero_d: set[str] = set()  # 0-d results of the statements read so far
        self.indices: set[str] = set()  # every name used as a subscript
        self.assigned: set[str] = set()  # every name the body assigns (its locals)
        self.namespace: dict[str, Any] = {}  # the locals of the function defining it
        self.declared_at: dict[str, ast.AST] = {}  # ``E: Tensor[...]`` statements

    def at(self, node: ast.AST) -> Node:
        """Where ``node`` is in the file (its source was read dedented)."""
        line = self.first + getattr(node, "lineno", 1) - 1
        return Node(line, self.indent + getattr(node, "col_offset", 0) + 1)

    def fail(self, node: ast.AST, message: str, hint: str | None = SUBSET) -> ScriptError:
        at = self.at(node)
        return ScriptError(message, location=f"{self.filename}:{at.line}:{at.col}", hint=hint)

    def expr(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Subscript):
            return self.access(node)
        if isinstance(node, ast.Name):
            value = self.number(node.id)
            if value is not None:
                return Const(value, self.at(node))
            if node.id in self.zero_d and node.id not in self.params:
                return Access(node.id, (), self.at(node))  # an earlier 0-d result: s as s[()]
            return Name(node.id, self.at(node))
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            if isinstance(node.value, bool):
                raise self.fail(node, "booleans are written as comparisons")
            return Const(node.value, self.at(node))
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            return Op(
                BINARY[type(node.op)], (self.expr(node.left), self.expr(node.right)), self.at(node)
            )
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.expr(node.operand)
            if isinstance(inner, Const):  # -128 is one i8 literal, not -(128)
                return Const(-inner.value, self.at(node))
            return Op("neg", (inner,), self.at(node))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
            return self.expr(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE:
            pair = (self.expr(node.left), self.expr(node.comparators[0]))
            return Op(COMPARE[type(node.ops[0])], pair, self.at(node))
        if isinstance(node, ast.IfExp):
            three = (self.expr(node.test), self.expr(node.body), self.expr(node.orelse))
            return Op("where", three, self.at(node))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            return self.call(node, node.func.id)
        raise self.fail(node, f"'{ast.unparse(node)}' is not in the kernel subset")

    def call(self, node: ast.Call, fn: str) -> Op:
        arity = {
            "where": 3,
            "max": 2,
            "min": 2,
            "abs": 1,
            **dict.fromkeys(MATH, 1),
            **dict.fromkeys(SCALARS, 1),
        }
        if fn not in arity:
            raise self.fail(node, f"'{fn}' is not a function of the kernel subset")
        if len(node.args) != arity[fn]:
            raise self.fail(node, f"{fn} takes {arity[fn]} argument(s), got {len(node.args)}")
        return Op(fn, tuple(self.expr(a) for a in node.args), self.at(node))

    def access(self, node: ast.Subscript) -> Access:
        if not isinstance(node.value, ast.Name):
            raise self.fail(node, "only a tensor argument or result can be subscripted")
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        names = []
        for item in items:
            if not isinstance(item, ast.Name):
                raise self.fail(
                    item,
                    f"subscript '{ast.unparse(item)}' is not an index variable",
                    hint="subscripts are plain names (i, j, k): index notation has no "
                    "offsets, slices or computed indices",
                )
            names.append(item.id)
        return Access(node.value.id, tuple(names), self.at(node))

    def target(self, node: ast.AST) -> tuple[str, tuple[str, ...]]:
        if isinstance(node, ast.Name):
            return node.id, ()
        if isinstance(node, ast.Subscript):
            a = self.access(node)
            if len(set(a.indices)) != len(a.indices):
                raise self.fail(node, "an index variable appears twice on the left")
            return a.tensor, a.indices
        raise self.fail(node, f"cannot assign to '{ast.unparse(node)}'")

    def statement(self, node: ast.stmt, into: Definition) -> None:
        self._statement(node, into)
        last = into.body[-1] if into.body else None
        if isinstance(last, Statement) and not last.indices:
            self.zero_d.add(last.target)  # a 0-d result: read by its name in later ones
        if isinstance(last, Call):  # s = fro(A): a 0-d result too, read as s
            definition = getattr(last.kernel, "definition", None)
            for k, target in enumerate(last.targets):
                if definition is not None and _returns_0d(definition, k):
                    self.zero_d.add(target)

    def _statement(self, node: ast.stmt, into: Definition) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        if isinstance(node, ast.Return):
            into.returns = self.returned(node)
            return
        if isinstance(node, ast.AnnAssign) and node.value is None:
            self.declare(node, into)
            return
        if isinstance(node, ast.AugAssign):
            if type(node.op) not in AUGMENTED:
                raise self.fail(node, "a reduction is written += or *= (or with max/min)")
            name, idx = self.target(node.target)
            value = self.expr(node.value)
            into.body.append(Statement(name, idx, AUGMENTED[type(node.op)], value, self.at(node)))
            return
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            if isinstance(node.value, ast.Call) and self.is_kernel_call(node.value):
                into.body.append(self.kernel_call(node))
                return
            call = node.value
            if self.is_scalar_max_min(node):  # s = max(s, e): a 0-d max (min) reduction
                assert isinstance(call, ast.Call)
                assert isinstance(call.func, ast.Name)
                name, idx = self.target(node.targets[0])
                value = self.expr(call.args[1])
                into.body.append(Statement(name, idx, call.func.id, value, self.at(node)))
                return
            if (
                isinstance(call, ast.Call)
                and not isinstance(node.targets[0], ast.Subscript)
                and ast.unparse(call.func) not in MATH  # n = sqrt(s): a 0-d statement
            ):
                what = ast.unparse(call.func)
                if what in ("max", "min"):
                    raise self.fail(
                        node,
                        f"'{ast.unparse(node)}' is no {what} reduction: the result comes first",
                        hint=f"write s = {what}(s, expr)",
                    )
                if getattr(self.lookup(what), "__sparsecomp_loops__", False) is True:
                    raise self.fail(
                        node,
                        f"'{what}' is a @loops function: a kernel calls @kernel functions only",
                        hint="call the @loops function from Python, or write it as a @kernel",
                    )
                raise self.fail(
                    node,
                    f"'{what}' is not a kernel defined before this one",
                    hint="a kernel calls @kernel functions defined above it (no recursion)",
                )
            name, idx = self.target(node.targets[0])
            value = self.expr(node.value)
            if not idx and not _reads_a_tensor(value):  # n = 2.0: no element type to take
                raise self.fail(
                    node,
                    f"'{name} = ...' assigns no elements and reads no tensor",
                    hint=f"write {name}[i, ...] = ... over index variables; a constant is "
                    "written where it is used, or defined outside the kernel",
                )
            reduce, value = self.max_min(name, idx, value)
            into.body.append(Statement(name, idx, reduce, value, self.at(node)))
            return
        raise self.fail(node, f"'{type(node).__name__}' statements are not in the kernel subset")

    def declare(self, node: ast.AnnAssign, into: Definition) -> None:
        """``E: Tensor[...]`` declares the type of a result the kernel computes."""
        if not isinstance(node.target, ast.Name):
            raise self.fail(node, "declare a tensor by its name: E: Tensor[...]")
        try:
            t = eval(compile(ast.Expression(node.annotation), "<annotation>", "eval"), self.scope())
        except Exception as e:
            raise self.fail(node, f"cannot evaluate the annotation: {e}", hint=None) from None
        if not isinstance(t, TensorType):
            raise self.fail(node, f"'{node.target.id}' must be declared a Tensor[...]")
        name = node.target.id
        computed = [s for s in into.body if name in (getattr(s, "targets", None) or
                                                       (getattr(s, "target", None),))]  # fmt: skip
        if computed:
            raise self.fail(
                node,
                f"'{name}' is declared after line {computed[0].at.line}, which computes it: "
                "a declaration gives the type of a result computed below it",
                hint=f"move '{name}: Tensor[...]' above the first statement that writes {name}",
            )
        into.declared[name] = t
        self.declared_at[name] = node

    def max_min(self, name: str, idx: tuple[str, ...], value: Any) -> tuple[str | None, Any]:
        """``T[i] = max(T[i], e)`` is a max reduction of ``e`` (likewise min)."""
        if isinstance(value, Op) and value.op in ("max", "min"):
            first, second = value.args
            if isinstance(first, Access) and (first.tensor, first.indices) == (name, idx):
                return value.op, second
        return None, value

    @staticmethod
    def is_scalar_max_min(node: ast.Assign) -> bool:
        """Whether ``node`` is ``s = max(s, e)`` (or ``min``) for a name ``s``."""
        target, call = node.targets[0], node.value
        return (
            isinstance(target, ast.Name)
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in ("max", "min")
            and len(call.args) == 2
            and not call.keywords
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id == target.id
        )

    def is_kernel_call(self, node: ast.Call) -> bool:
        """Whether ``node`` calls a ``@kernel`` (a ``Kernel``, which marks itself)."""
        return getattr(self.callee(node.func), "__sparsecomp_kernel__", False) is True

    def callee(self, func: ast.expr) -> Any:
        """What a call's ``func`` names: a name, or an attribute of one (``kmod.helper``,
        a kernel of another module); None for anything else."""
        if isinstance(func, ast.Name):
            return self.lookup(func.id)
        if isinstance(func, ast.Attribute):
            owner = self.callee(func.value)
            return None if owner is None else getattr(owner, func.attr, None)
        return None

    def number(self, name: str) -> float | int | None:
        """The value of a Python number the kernel reads by name (a module constant,
        ``ALPHA = 0.5``), where the name is no argument or index variable."""
        if name in self.params or name in self.indices or name in self.assigned:
            return None  # a local shadows a module's number, as in Python
        value = self.scope().get(name)
        if isinstance(value, np.generic):
            value = value.item()  # a numpy scalar: ALPHA = np.float32(0.5)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        return None

    def scope(self) -> dict[str, Any]:
        """The names the function sees: its module's globals, the locals of the function
        that defined it, and its closure (a cell not filled yet, as the kernel's own
        name while it is decorated, is left out)."""
        scope = {**getattr(self.fn, "__globals__", {}), **self.namespace}
        code, cells = getattr(self.fn, "__code__", None), getattr(self.fn, "__closure__", None)
        for name, cell in zip(code.co_freevars if code else (), cells or (), strict=False):
            try:
                scope[name] = cell.cell_contents
            except ValueError:
                continue
        return scope

    def lookup(self, name: str) -> Any:
        return self.scope().get(name)

    def kernel_call(self, node: ast.Assign) -> Call:
        assert isinstance(node.value, ast.Call)
        target = node.targets[0]
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise self.fail(node, "a kernel call's results are bound to plain names")
        kernel = self.callee(node.value.func)
        return Call(
            tuple(e.id for e in elts),  # type: ignore[attr-defined]
            kernel,
            self.call_arguments(node, kernel),
            self.at(node),
        )

    def call_arguments(self, node: ast.Assign, kernel: Any) -> tuple[str | Const, ...]:
        """A kernel call's arguments in the callee's parameter order, bound as Python binds
        a call: by position, by keyword, else the callee's default."""
        call = node.value
        assert isinstance(call, ast.Call)
        params = list(kernel.definition.params)
        defaults = tuple(getattr(kernel.fn, "__defaults__", None) or ())
        bound: dict[str, str | Const] = {}
        given = [(params[n] if n < len(params) else None, a) for n, a in enumerate(call.args)]
        given += [(k.arg, k.value) for k in call.keywords]
        for name, a in given:
            if name is None or name not in params:
                what = "too many arguments" if name is None else f"no parameter '{name}'"
                raise self.fail(node, f"'{kernel.__name__}' has {what}",
                                hint=f"its parameters: {', '.join(params)}")  # fmt: skip
            if name in bound:
                raise self.fail(node, f"'{kernel.__name__}' gets '{name}' twice")
            bound[name] = self.call_argument(node, a)
        at = self.at(node)
        for name, value in zip(params[len(params) - len(defaults) :], defaults, strict=True):
            if name not in bound and _is_plain_number(value):
                bound[name] = Const(value, at)
        missing = [p for p in params if p not in bound]
        if missing:
            raise self.fail(
                node,
                f"'{kernel.__name__}' takes {len(params)} arguments, got {len(bound)} "
                f"(no {', '.join(repr(m) for m in missing)})",
            )
        return tuple(bound[p] for p in params)

    def call_argument(self, node: ast.Assign, a: ast.expr) -> str | Const:
        """A kernel call's argument: a name, or a number (a scalar parameter's value)."""
        if isinstance(a, ast.Name):
            return a.id
        number = a.operand if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub) else a
        if isinstance(number, ast.Constant) and _is_plain_number(number.value):
            value = number.value
            assert isinstance(value, int | float)
            return Const(-value if number is not a else value, self.at(node))
        raise self.fail(
            node,
            f"a kernel call's argument '{ast.unparse(a)}' is neither a name nor a number",
            hint="compute it into a name first (T[i, j] = ...), then pass the name",
        )

    def returned(self, node: ast.Return) -> tuple[str, ...]:
        value = node.value
        elts = value.elts if isinstance(value, ast.Tuple) else [value]
        if value is None or not all(isinstance(e, ast.Name) for e in elts):
            raise self.fail(node, "a kernel returns names of tensors: return C (or C, D)")
        return tuple(e.id for e in elts)  # type: ignore[union-attr]


def _annotations(fn: Any, reader: _Reader, func: ast.FunctionDef) -> dict[str, Any]:
    """``fn``'s annotations, evaluated; a plain name that is not defined (``alpha:
    "T"``) is a scalar of type variable ``T``.

    Under ``from __future__ import annotations`` every annotation is a string,
    evaluated here in what the function sees (:meth:`_Reader.scope`): ``"T"`` is
    then the quoted ``'T'`` (a type variable), and a bare name that is not defined
    there (a misspelt ``f23``) is an error."""
    future = bool(getattr(fn, "__code__", None) and fn.__code__.co_flags & _FUTURE_ANNOTATIONS)
    scope = reader.scope()
    nodes: dict[str, ast.AST] = {a.arg: a for a in func.args.args}
    nodes["return"] = func.returns or func
    out = {}
    for key, value in inspect.get_annotations(fn).items():
        if isinstance(value, str):
            try:
                value = eval(value, scope)
            except NameError as e:
                if future or not value.isidentifier():
                    where = f"{'the result' if key == 'return' else repr(key)}"
                    raise reader.fail(
                        nodes.get(key, func),
                        f"the annotation of {where} of '{fn.__name__}' names what is not "
                        f"defined: {e}",
                        hint='define it before the kernel (a type variable is written as a '
                        'string, alpha: "T")',
                    ) from None
                value = TypeVariable(value)
            except Exception as e:
                raise reader.fail(
                    nodes.get(key, func),
                    f"cannot evaluate the annotation {value!r} of '{fn.__name__}': {e}",
                    hint=None,
                ) from None
        out[key] = value
    return out


def parse(fn: Any, namespace: dict[str, Any] | None = None) -> Definition:
    """Read the Python function ``fn`` (its source and annotations) into a :class:`Definition`;
    ``namespace``: the names of the function that defined it (its locals), seen after
    its module's and before its closure's."""
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as e:
        raise ScriptError(
            f"the source of {fn!r} is not available: {e}",
            hint="define kernels in a file or a notebook cell (IPython and Jupyter keep "
            "a cell's source; exec of a string and the plain Python 3.11 prompt do not)",
        ) from None
    source = "".join(lines)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = ast.parse(textwrap.dedent(source))
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        what = "an async def" if isinstance(func, ast.AsyncFunctionDef) else "not a def statement"
        if fn.__name__ == "<lambda>":
            what = "a lambda"
        raise ScriptError(
            f"'{fn.__name__}' is {what}: a kernel is a plain def",
            location=f"{filename}:{first}:{indent + 1}",
            hint="write it as def name(A: Tensor[...], ...): ... under @sparsecomp.kernel",
        )
    reader = _Reader(fn, filename, first, indent)
    reader.namespace = dict(namespace or {})
    reader.params = {a.arg for a in func.args.args}
    for node in ast.walk(func):
        if isinstance(node, ast.Subscript):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            reader.indices |= {item.id for item in items if isinstance(item, ast.Name)}
        targets = list(node.targets) if isinstance(node, ast.Assign) else []
        targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for t in targets:
            t = t.value if isinstance(t, ast.Subscript) else t
            reader.assigned |= {t.id} if isinstance(t, ast.Name) else set()
    hints = _annotations(fn, reader, func)
    params: dict[str, TensorType | Scalar | str] = {}
    for arg in func.args.args:
        hint = hints.get(arg.arg)
        if isinstance(hint, TypeVariable):
            hint = hint.name
        if not isinstance(hint, TensorType | Scalar | str):
            raise reader.fail(
                arg,
                f"argument '{arg.arg}' needs a Tensor[...] or scalar type annotation",
                hint='for example A: Tensor[f32, ("M", "K"), "csr"] or alpha: f32',
            )
        if arg.arg in reader.indices:  # s[i] += A[i, j] * j: both, silently
            raise reader.fail(
                arg,
                f"argument '{arg.arg}' is also an index variable of the body (a subscript "
                f"uses it): in one expression it would be both",
                hint="rename the argument or the index variable",
            )
        params[arg.arg] = hint
    if func.args.vararg or func.args.kwarg or func.args.kwonlyargs:
        raise reader.fail(func, "a kernel takes positional arguments only")
    ret = hints.get("return")
    results: list[TensorType | None] = list(getattr(ret, "__args__", ())) if ret is not None else []
    if isinstance(ret, TensorType):
        results = [ret]
    elif isinstance(ret, tuple):  # -> (Tensor[...], Tensor[...]), as tuple[...] reads
        results = list(ret)
    for r in results:
        if r is not None and not isinstance(r, TensorType):
            raise reader.fail(
                func.returns or func,
                f"the return annotation names {r!r}, not a Tensor[...]",
                hint="annotate results as -> Tensor[...] or -> tuple[Tensor[...], ...]",
            )
    definition = Definition(fn.__name__, filename, params, results, reader.at(func))
    for node in func.body:
        if definition.returns:
            raise reader.fail(
                node,
                "this statement comes after the kernel's return: it would never run",
                hint="remove it, or move the return after it",
            )
        reader.statement(node, definition)
    if not definition.returns:
        raise reader.fail(func, f"kernel '{fn.__name__}' returns nothing", hint="end with return C")
    for name, annotated in zip(definition.returns, results, strict=False):
        declared = definition.declared.get(name)
        if annotated is not None and declared is not None and declared != annotated:
            raise reader.fail(
                reader.declared_at[name],
                f"'{name}' is declared {_written(declared)} here, and the kernel's return "
                f"annotation says {_written(annotated)}",
                hint="make them agree (or declare the result in one place)",
            )
    return definition


def _written(t: TensorType) -> str:
    """``Tensor[f32, ("M",), "coo"]`` as a user writes it."""
    dtype = t.dtype.name if isinstance(t.dtype, Scalar) else t.dtype
    layout = f", {t.encoding!r}" if t.encoding else ""
    shape = repr(t.shape[0]) if len(t.shape) == 1 else repr(t.shape)
    return f"Tensor[{dtype}, {shape}{layout}]"


def bind_types(d: Definition, elements: list[str | None]) -> dict[str, Scalar]:
    """The type variables of ``d`` bound from its arguments' element type names
    (``elements``, in order; None for a Python number, which takes the type its
    annotation gives); a clear error where two bindings disagree or an
    argument's type differs from its annotation."""
    bound: dict[str, Scalar] = {}
    for (name, p), got in zip(d.params.items(), elements, strict=True):
        want = p.dtype if isinstance(p, TensorType) else p
        if got is None:
            continue
        if got not in SCALARS:
            raise ScriptError(f"argument '{name}' of '{d.name}' has element type {got}")
        have = SCALARS[got]
        if isinstance(want, str):
            if bound.setdefault(want, have) != have:
                raise ScriptError(
                    f"type variable '{want}' of '{d.name}' is {bound[want]} and {have} "
                    f"(argument '{name}')"
                )
        elif want != have:
            convert = f"convert with .astype(np.{want.dtype.name})"
            if want.name == "f16" and isinstance(p, TensorType) and p.encoding:
                convert = (  # scipy.sparse refuses float16
                    "a scipy.sparse matrix holds no float16: pass "
                    "SparseTensor.from_scipy(A, ...).astype(np.float16)"
                )
            raise ScriptError(
                f"argument '{name}' of '{d.name}' is {want}, got {have}",
                hint=f"{convert}, or annotate a type variable "
                '(Tensor["T", ...]) to compile one kernel per element type',
            )
    for (name, p), got in zip(d.params.items(), elements, strict=True):
        if got is None and isinstance(p, str) and p not in bound:
            raise ScriptError(
                f"argument '{name}' of '{d.name}' is a Python number, and nothing else binds "
                f"type variable '{p}'",
                hint="pass a numpy scalar (np.float32(...)) to choose the type",
            )
    return bound
