"""``@loops``: functions written as explicit loops, one statement per operation.

Where ``@kernel`` (:mod:`.kernel`) says *what* a kernel computes in index
notation, a ``@loops`` function says *how*: the loops over position ranges and
the buffer reads of stage II (``sparse-iter-lower-iterations``), or any other
IR of func, arith, math, scf, tensor and memref operations. It is what
:func:`~sparsecomp.script.printer.to_python` prints for IR past stage I, and
it re-emits that IR exactly (:mod:`.loops_emit`), so that a developer can read
what a pass did, edit it, and compile the edit:

    from sparsecomp.script import loops, op

    CSR = "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>"

    @loops(fastmath="reassoc,contract")
    def spmv(A: f"tensor<?x?xf32, {CSR}>", x: "tensor<?xf32>") -> "tensor<?xf32>":
        m = dim(A, 0)
        pos = op("sparse_iter.positions", A, types=["tensor<?xi64>"], attrs={"level": "1 : i64"})
        crd = op("sparse_iter.coordinates", A, types=["tensor<?xi64>"], attrs={"level": "1 : i64"})
        val = op("sparse_iter.values", A, types=["tensor<?xf32>"])
        y = op("tensor.empty", m, types=["tensor<?xf32>"])
        for i in range(m):
            acc = f32(0.0)
            for p in range(uindex(pos[i]), uindex(pos[i + 1])):
                acc = acc + val[p] * x[uindex(crd[p])]
            y[i] = acc
        return y

The subset:

* arguments and results are annotated with MLIR types as text;
* ``x = expr``, ``x, y = a, b``; ``t[i, j] = v`` stores into a memref, or
  inserts into a tensor (``t`` then names the new tensor);
* ``for i in range(lo, hi, step):`` is ``scf.for`` (``attrs={...}`` after the
  bounds gives it attributes). A variable bound before the loop and bound
  again in it is carried from one iteration to the next, and after the loop
  it holds the last value, as in Python. ``if c:`` / ``else:`` is
  ``scf.if``; the variables the branches bind are its results;
* expressions: ``+ - * /`` (float or integer ops by the operands' type; the
  function's ``fastmath`` flags on the float ones), ``& | ^``, unary ``-``,
  one comparison, ``t[i, j]`` (``tensor.extract`` / ``memref.load``),
  ``dim(t, d)``, ``where(c, a, b)``, ``max``, ``min``, ``exp``, ``log``,
  ``sqrt``, ``rsqrt``, ``tanh``, ``erf``, ``sin``, ``cos``, ``absf``,
  ``index(x)`` / ``uindex(x)`` (``arith.index_cast`` / ``index_castui``),
  constants ``index(0)``, ``f32(1.5)``, ``i32(7)``, ``i1(True)`` (a bare
  number takes the type of the other operand, or ``index`` in bounds and
  subscripts);
* any other operation: ``op("dialect.name", operands..., types=[result
  types], attrs={name: MLIR text}, regions=[functions])``. A region is a
  function defined just above in the body (its parameters are the block's
  arguments, annotated with their types) that ends in its terminator, itself
  an ``op(...)``; ``None`` is an empty region. At module level, ``op(...)``
  gives a global or a declaration for :func:`~sparsecomp.script.assemble`.

Errors are :class:`~sparsecomp.script.ScriptError` errors, located at the Python line.
"""

from __future__ import annotations
import __future__

import ast
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparsecomp.script.parse import ScriptError


@dataclass(frozen=True)
class TopOp:
    """A module-level op other than a function with a body (``op(...)`` at module level)."""

    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    regions: tuple[None, ...] = ()

    def emit(self) -> Any:
        """Create the op at the current insertion point (in a context)."""
        from mlir import ir

        return ir.Operation.create(
            self.name,
            attributes={k: ir.Attribute.parse(v) for k, v in self.attrs.items()},
            regions=len(self.regions),
        )


def op(name: str, *operands: Any, types: Any = (), attrs: dict[str, str] | None = None,
       regions: Any = ()) -> TopOp:  # fmt: skip
    """At module level: a global or a declaration (no operands, no results, empty
    regions) for :func:`~sparsecomp.script.assemble`. Inside a ``@loops``
    function, any operation (read by the front end, never called)."""
    if operands or types or any(r is not None for r in regions):
        raise ScriptError(
            "op(...) at module level takes a name, attrs and empty regions (None) only",
            hint="operations with operands belong in a @loops function",
        )
    return TopOp(name, dict(attrs or {}), tuple(None for _ in regions))


class LoopKernel:
    """A ``@loops`` function: its syntax tree, read when decorated; its IR,
    built on demand (:meth:`module`); see the module."""

    __sparsecomp_loops__ = True  # what a @kernel's parse looks for in a call

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        fastmath: str | None = None,
        private: bool = False,
        attrs: dict[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        self.fn = fn
        self.__name__ = name or fn.__name__
        self.__doc__ = fn.__doc__
        self.fastmath = fastmath
        self.private = private
        self.attrs = dict(attrs or {})
        try:
            lines, self.first_line = inspect.getsourcelines(fn)
            self.filename = inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            raise ScriptError(f"the source of {fn!r} is not available: {e}") from None
        self.indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
        tree = ast.parse(textwrap.dedent("".join(lines))).body[0]
        if not isinstance(tree, ast.FunctionDef):
            raise ScriptError(f"{fn!r} is not a plain function")
        self.tree = tree
        hints = self._annotations(fn)
        self.params: list[str] = []
        for a in tree.args.args:
            if not isinstance(hints.get(a.arg), str):
                raise self._error(
                    a, f"argument '{a.arg}' needs its MLIR type as text ('tensor<?xf32>')"
                )
            self.params.append(hints[a.arg])
        self.results = self._results(tree.returns or tree, hints.get("return"))
        self._executables: dict[Any, Any] = {}

    def _error(self, node: Any, message: str) -> ScriptError:
        line = self.first_line + node.lineno - 1
        where = f"{self.filename}:{line}:{node.col_offset + 1 + self.indent}"
        return ScriptError(message, location=where)

    @staticmethod
    def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
        """The annotations' values (MLIR type text), evaluated where the module
        defers them (``from __future__ import annotations``)."""
        hints = dict(getattr(fn, "__annotations__", {}))
        if fn.__code__.co_flags & __future__.annotations.compiler_flag:
            for k, v in hints.items():
                try:
                    hints[k] = eval(v, fn.__globals__)  # an annotation's own text
                except Exception:
                    hints[k] = None
        return hints

    def _results(self, node: ast.AST, hint: Any) -> list[str]:
        items = [] if hint is None else list(hint) if isinstance(hint, tuple) else [hint]
        if not all(isinstance(t, str) for t in items):
            raise self._error(node, "results are annotated with MLIR types as text")
        return items

    def emit(self) -> Any:
        """The ``func.func``, at the current insertion point (in a context)."""
        from sparsecomp.script.loops_emit import FunctionEmitter

        return FunctionEmitter(self).emit()

    def module(self) -> Any:
        """A module of this function alone, verified, in a fresh context."""
        from sparsecomp.script.kernel import assemble

        return assemble(self)

    @property
    def mlir(self) -> str:
        """The function's IR as text."""
        return str(self.module())

    def compile(self, target: Any = "host", **options: Any) -> Any:
        """The executable (:func:`sparsecomp.compile`'s target and options), cached."""
        import sparsecomp

        key = (str(target), tuple(sorted(options.items())))
        if key not in self._executables:
            text = self.module().operation.get_asm(enable_debug_info=True)  # Python lines
            self._executables[key] = sparsecomp.compile(text, target, **options)
        return self._executables[key]

    def __call__(self, *args: Any, target: Any = "host", out: Any = None) -> Any:
        """Call the function compiled for ``target`` (as a ``@kernel``'s call takes it);
        ``out``: the result's destination, as a compiled function takes it."""
        function = self.compile(target).functions[self.__name__]
        return function(*args) if out is None else function(*args, out=out)

    def __repr__(self) -> str:
        return f"<sparsecomp loops {self.__name__}>"


def loops(
    fn: Callable[..., Any] | None = None,
    *,
    fastmath: str | None = None,
    private: bool = False,
    attrs: dict[str, str] | None = None,
    name: str | None = None,
) -> Any:
    """Decorate a function of the loop subset (see the module): ``@loops`` or
    ``@loops(fastmath="reassoc,contract", private=True, attrs={...})``
    (``fastmath``: the flags of the float ops the operators write;
    ``attrs``: the function's attributes, name -> MLIR text; ``name``: its
    symbol, where that is not the Python name)."""

    def make(f: Callable[..., Any]) -> LoopKernel:
        return LoopKernel(f, fastmath=fastmath, private=private, attrs=attrs, name=name)

    return make if fn is None else make(fn)
