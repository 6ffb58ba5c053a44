"""``@kernel``: a Python function in the index-notation subset, compiled on first call.

    from sparsecomp.script import kernel, Tensor, f32

    @kernel
    def spmv(A: Tensor[f32, ("M", "N"), "csr"], x: Tensor[f32, "N"]) -> Tensor[f32, "M"]:
        y[i] += A[i, j] * x[j]
        return y

    y = spmv(scipy_csr_matrix, numpy_vector)

The function is parsed when it is decorated (errors in the subset are
reported then, at their line); its MLIR is built and compiled at the first
call, and again for each new *specialization*: the element types bound to
its type variables, the sizes of the symbols named in ``constants`` (as
Triton's ``constexpr``: those sizes become static in the IR), and the
target. Executables are cached per specialization, and on disk by the
compile cache as any compiled ``.mlir`` is.

* ``spmv.mlir`` / ``spmv.module(...)``: the stage-I IR (text / module);
* ``spmv.compile(target=..., **options)``: the executable
  (:func:`sparsecomp.compile`'s options);
* calling ``spmv(...)`` takes what a compiled ``.mlir`` function takes:
  numpy arrays, scipy.sparse matrices, ``SparseTensor``s; with torch tensors
  among the arguments (the torch extra) it is called through
  :func:`sparsecomp.torch.call`: ``torch.sparse`` tensors go in too, and
  the results come back as torch tensors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from sparsecomp import forksafe
from sparsecomp.errors import SparsecompError
from sparsecomp.script.parse import ScriptError, bind_types, parse
from sparsecomp.script.types import SCALARS, Scalar, TensorType, scalar_of


def _kind(arg: Any) -> tuple[Any, ...]:
    """What the specialization depends on in an argument: its type, element type, rank."""
    return (type(arg), getattr(arg, "dtype", None), getattr(arg, "ndim", None))


def _is_number(arg: Any) -> bool:
    """A Python int or float, or a numpy integer or floating scalar (``np.int64(3)``,
    what numpy code hands out): a number passed as its parameter's type."""
    if isinstance(arg, int | float):
        return not isinstance(arg, bool)
    return type(arg).__module__ == "numpy" and getattr(arg, "ndim", None) == 0 and (
        getattr(getattr(arg, "dtype", None), "kind", "") in ("i", "u", "f")
    )


def _array_dtype(p: TensorType, arg: Any) -> str:
    """The numpy name of the element type an array for ``p`` has (``arg``'s own where
    ``p``'s is a type variable)."""
    import numpy as np

    if isinstance(p.dtype, str):
        return str(_dtype_of(arg).name)
    return str(np.dtype(p.dtype.dtype).name)


def _dtype_of(arg: Any) -> Any:
    dtype = getattr(arg, "dtype", None)
    if dtype is None:
        import numpy as np

        dtype = np.asarray(arg).dtype
    return dtype


class Kernel:
    """A kernel written in Python; see the module."""

    def __init__(
        self,
        fn: Callable[..., Any],
        constants: Iterable[str] = (),
        *,
        private: bool = False,
        attributes: dict[str, str] | None = None,
        namespace: dict[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.constants = tuple(constants)
        self.private = private
        self.definition = parse(fn, namespace)
        self.definition.attributes = dict(attributes or {})
        self.__sparsecomp_kernel__ = True  # what parse looks for in a call
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._lock = forksafe.lock()
        self._executables: dict[tuple[Any, ...], Any] = {}
        self._calls: dict[tuple[Any, ...], tuple[Any, dict[str, Scalar] | None, bool]] = {}
        self._check_constants()
        #: where each constant's size is read: (argument, dimension)
        self._sized = [
            next(
                (a, p.shape.index(c))
                for a, p in enumerate(self.definition.params.values())
                if isinstance(p, TensorType) and c in p.shape
            )
            for c in self.constants
        ]

    def _check_constants(self) -> None:
        symbols = {
            s for p in self.definition.params.values() if isinstance(p, TensorType) for s in p.shape
        }
        for c in self.constants:
            if c not in symbols:
                raise ScriptError(
                    f"constant '{c}' of '{self.__name__}' is no argument's size symbol"
                )

    def _type_vars(self) -> list[str]:
        d = self.definition
        found = [p.dtype if isinstance(p, TensorType) else p for p in d.params.values()]
        return [v for v in dict.fromkeys(found) if isinstance(v, str)]

    # -- IR ------------------------------------------------------------------------------
    def module(
        self, types: dict[str, Any] | None = None, sizes: dict[str, int] | None = None
    ) -> Any:
        """The stage-I module for element types bound to the type variables
        (``types``: name -> ``f32``...) and static sizes of the ``constants``."""
        from sparsecomp.ir.context import make_context
        from sparsecomp.script.emit import ModuleEmitter

        unknown = [v for v in (types or {}).values() if isinstance(v, str) and v not in SCALARS]
        if unknown:
            raise ScriptError(
                f"no element type '{unknown[0]}'", hint=f"one of {', '.join(SCALARS)}"
            )
        bound = {k: (SCALARS[v] if isinstance(v, str) else v) for k, v in (types or {}).items()}
        missing = [v for v in self._type_vars() if v not in bound]
        if missing:
            raise ScriptError(
                f"kernel '{self.__name__}' has type variable(s) {', '.join(missing)}",
                hint=f"call it, or pass types={{'{missing[0]}': 'f32'}}",
            )
        unsized = [c for c in self.constants if c not in (sizes or {})]
        if unsized:
            raise ScriptError(f"kernel '{self.__name__}' needs sizes for {', '.join(unsized)}")
        ctx = make_context()
        with ctx:
            from mlir import ir

            with ir.Location.unknown():
                emitter = ModuleEmitter(sizes)
                emitter.kernels([self], bound)
            _verify(emitter.module)
        return emitter.module

    @property
    def mlir(self) -> str:
        """The stage-I IR as text (the kernel must have no type variables or constants)."""
        return str(self.module())

    # -- compiling and calling -------------------------------------------------------------
    def compile(
        self,
        target: Any = "host",
        types: dict[str, Any] | None = None,
        sizes: dict[str, int] | None = None,
        **options: Any,
    ) -> Any:
        """The executable for a specialization (see :meth:`module`) and ``target``."""
        key = (
            str(target),
            tuple(sorted((k, str(v)) for k, v in (types or {}).items())),
            tuple(sorted((sizes or {}).items())),
            tuple(sorted(options.items())),
        )
        with self._lock:
            if key not in self._executables:
                from sparsecomp.compiler.driver import compile as compile_mlir

                # with locations: a diagnostic of any stage names the Python line
                text = self.module(types, sizes).operation.get_asm(enable_debug_info=True)
                self._executables[key] = compile_mlir(text, target, **options)
            return self._executables[key]

    def specialization(self, args: tuple[Any, ...]) -> tuple[dict[str, Scalar], dict[str, int]]:
        """The type variables and constant sizes ``args`` bind."""
        d = self.definition
        if len(args) != len(d.params):
            raise SparsecompError(
                f"'{self.__name__}' takes {len(d.params)} arguments, got {len(args)}"
            )
        names = []
        for (name, p), a in zip(d.params.items(), args, strict=True):
            if isinstance(p, TensorType) and isinstance(a, list | tuple):
                raise SparsecompError(  # as a compiled function refuses one
                    f"argument '{name}' of '{self.__name__}' is a {type(a).__name__}; "
                    "a tensor argument is an array",
                    hint=f"pass np.asarray({name}, np.{_array_dtype(p, a)})",
                )
            # a numpy scalar binds a type variable it is given for (np.float32(2.0) for
            # alpha: "T"); for a parameter of a type, it is a number, as a Python one is
            number = _is_number(a) and (type(a) in (int, float) or not isinstance(p, str))
            try:
                names.append(None if number else scalar_of(_dtype_of(a)).name)
            except SparsecompError as e:
                raise SparsecompError(
                    f"argument '{name}' of '{self.__name__}': {e.message}", hint=e.hint
                ) from None
        types = bind_types(d, names)
        sizes: dict[str, int] = {}
        for (name, p), arg in zip(d.params.items(), args, strict=True):
            if not isinstance(p, TensorType):
                continue
            shape = tuple(getattr(arg, "shape", ()))
            if len(shape) != p.rank:
                raise SparsecompError(
                    f"argument '{name}' of '{self.__name__}' has {len(shape)} dimension(s), "
                    f"its annotation {p.rank}"
                )
            for sym, n in zip(p.shape, shape, strict=True):
                if isinstance(sym, int) and sym != n:
                    raise SparsecompError(f"argument '{name}' has size {n} where {sym} is declared")
                if sym in self.constants and sizes.setdefault(str(sym), int(n)) != int(n):
                    raise SparsecompError(f"size '{sym}' is {sizes[str(sym)]} and {n}")
        return types, sizes

    def __call__(self, *args: Any, target: Any = "host", out: Any = None, **named: Any) -> Any:
        """Call the kernel's executable for these arguments' specialization (compiled
        at the first call with it; later calls with arguments of the same kinds,
        element types and ranks find it by one dictionary lookup). Arguments may be
        named as the kernel's parameters are; ``out``: the result's destination, as a
        compiled function takes it (an array, or a tuple with one per result)."""
        if named or len(args) < len(self.definition.params):
            args = self._positional(args, named)
        sizes = tuple(
            getattr(args[a], "shape", ())[d] if a < len(args) else None for a, d in self._sized
        )
        key = (target if isinstance(target, str) else str(target), tuple(map(_kind, args)), sizes)
        hit = self._calls.get(key)
        if hit is None:
            types, bound = self.specialization(args)
            exe = self.compile(target, {k: v.name for k, v in types.items()}, bound)
            has_numbers = any(_is_number(a) or type(a).__name__ == "float16" for a in args)
            torch = any(type(a).__module__.startswith("torch") for a in args)
            hit = (exe.functions[self.__name__], types if has_numbers else None, torch)
            self._calls[key] = hit
        fn, number_types, torch = hit
        typed = args if number_types is None else self._numbers_typed(args, number_types)
        extra = {} if out is None else {"out": out}
        if torch:
            from sparsecomp.torch.tensors import call  # torch in, torch out

            return call(fn, *typed, **extra)
        return fn(*typed, **extra)

    def _positional(self, args: tuple[Any, ...], named: dict[str, Any]) -> tuple[Any, ...]:
        """``args`` and the ``named`` ones in the kernel's parameter order, the function's
        defaults for the others, as Python binds a call (a ``TypeError`` for an unknown,
        repeated or missing one)."""
        params = list(self.definition.params)
        defaults = tuple(getattr(self.fn, "__defaults__", None) or ())
        fallback = dict(zip(params[len(params) - len(defaults) :], defaults, strict=True))
        if len(args) > len(params):
            raise TypeError(
                f"{self.__name__}() takes {len(params)} arguments but {len(args)} were given"
            )
        bound = dict(zip(params, args, strict=False))
        for name, value in named.items():
            if name not in params:
                raise TypeError(f"{self.__name__}() got an unexpected keyword argument '{name}'")
            if name in bound:
                raise TypeError(f"{self.__name__}() got multiple values for argument '{name}'")
            bound[name] = value
        for name, value in fallback.items():
            bound.setdefault(name, value)
        missing = [p for p in params if p not in bound]
        if missing:
            raise TypeError(
                f"{self.__name__}() missing {len(missing)} required argument(s): "
                + ", ".join(f"'{m}'" for m in missing)
            )
        return tuple(bound[p] for p in params)

    def _numbers_typed(self, args: tuple[Any, ...], types: dict[str, Scalar]) -> list[Any]:
        """The arguments, Python numbers as numpy scalars of their parameter's type."""
        import numpy as np

        from sparsecomp.errors import ArgumentError

        out = []
        for (name, p), arg in zip(self.definition.params.items(), args, strict=True):
            if isinstance(p, TensorType):
                out.append(arg)
                continue
            scalar = types[p] if isinstance(p, str) else p
            if isinstance(arg, np.float16) and scalar.name == "f16":
                arg = np.float32(arg)  # an f16 scalar is passed as f32 (emit.param_type)
            elif _is_number(arg):
                dtype = np.dtype(scalar.dtype)
                whole = isinstance(arg, int) or np.dtype(type(arg)).kind in ("i", "u")
                exact = dtype.kind == "f" or (
                    whole and np.iinfo(dtype).min <= int(arg) <= np.iinfo(dtype).max
                )
                if not exact:  # numpy would truncate 2.5 to 2, or overflow
                    raise ArgumentError(
                        f"{self.__name__}: argument '{name}': expected an {scalar.name} "
                        f"scalar, got {arg!r}"
                    )
                # an f16 scalar is rounded to f16 here, then passed as f32 (exact): a
                # Python float rounded to f32 first was off by an f16 ulp (2 roundings)
                if scalar.name == "f16":
                    with np.errstate(over="ignore"):  # inf, as the kernel's truncf gave
                        arg = np.float32(np.float16(arg))
                else:
                    arg = dtype.type(arg)
            out.append(arg)
        return out

    def __repr__(self) -> str:
        return f"<sparsecomp kernel {self.__name__}>"


def _verify(module: Any) -> None:
    """Verify the built module; a ScriptError with the located diagnostics if it fails."""
    from mlir import ir

    try:
        module.operation.verify()
    except ir.MLIRError as e:
        lines = [f"{d.location}: {d.message}" for d in e.error_diagnostics]
        raise ScriptError("the kernel's IR does not verify:\n" + "\n".join(lines)) from None


def kernel(
    fn: Callable[..., Any] | None = None,
    *,
    constants: Iterable[str] = (),
    private: bool = False,
    attributes: dict[str, str] | None = None,
) -> Any:
    """Decorate a function of the index-notation subset (see :mod:`sparsecomp.script`):
    ``@kernel``, or ``@kernel(constants=("N",))``. ``private``: emitted as a
    private function (in :func:`assemble`); ``attributes``: the function's
    attributes, name -> MLIR attribute text (``{"sparse_iter.target": '"gpu"'}``)."""
    if fn is None:

        def decorate(f: Callable[..., Any]) -> Kernel:
            where = _definer(sys._getframe(1))
            return Kernel(f, constants, private=private, attributes=attributes, namespace=where)

        return decorate
    where = _definer(sys._getframe(1))
    return Kernel(fn, constants, private=private, attributes=attributes, namespace=where)


def _definer(frame: Any) -> dict[str, Any]:
    """The local names of the function that defines a kernel (none at module level):
    its string annotations (``from __future__ import annotations``) may name them, and
    Python keeps no closure cell for a name that only an annotation uses."""
    return {} if frame.f_code.co_name == "<module>" else dict(frame.f_locals)


def assemble(
    *kernels: Any,
    attributes: dict[str, str] | None = None,
    types: dict[str, Any] | None = None,
    sizes: dict[str, int] | None = None,
) -> Any:
    """One module of ``kernels`` (in this order; a call of one of them calls it, not
    a copy) with the module ``attributes`` (name -> MLIR attribute text), in a
    fresh context. ``kernels`` are ``@kernel`` and ``@loops`` functions and
    module-level ``op(...)`` calls (:mod:`.loops`). What
    :func:`~sparsecomp.script.printer.to_python` ends with."""
    from mlir import ir

    from sparsecomp.ir.context import make_context
    from sparsecomp.script.emit import ModuleEmitter

    bound = {k: (SCALARS[v] if isinstance(v, str) else v) for k, v in (types or {}).items()}
    with make_context(), ir.Location.unknown():
        emitter = ModuleEmitter(sizes)
        done = iter(emitter.kernels([k for k in kernels if isinstance(k, Kernel)], bound))
        with ir.InsertionPoint(emitter.module.body):
            placed = [next(done) if isinstance(k, Kernel) else k.emit() for k in kernels]
        last = None
        for o in placed:  # the given order
            if last is None:
                o.operation.move_before(emitter.module.body.operations[0])
            else:
                o.operation.move_after(last)
            last = o.operation
        for name, text in (attributes or {}).items():
            emitter.module.operation.attributes[name] = ir.Attribute.parse(text)
        _verify(emitter.module)
    return emitter.module
