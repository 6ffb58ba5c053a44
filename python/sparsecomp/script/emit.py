"""A parsed kernel as a stage-I MLIR module, built with the MLIR Python bindings.

Each statement becomes one ``linalg.generic``: its loops are the index
variables on the left (``parallel``), then those only on the right
(``reduction``), in the order they first appear; each distinct tensor
element read is an input with its indexing map; the output is the target
(an argument or an earlier result, read and written), or a new
``tensor.empty`` (with the result annotation's encoding where the target is
returned) filled with the reduction's identity where it is dense. A kernel
call becomes a ``func.call`` of the callee, emitted once per
specialization as a private function. Every op carries the location of its
Python line (``file:line:col``), so that a diagnostic from any later stage
names the user's line.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, func, linalg, sparse_tensor, tensor

from sparsecomp.dialects import sparse_iter
from sparsecomp.errors import SparsecompError
from sparsecomp.lowering.sizes import ATTR as SAME_SIZES
from sparsecomp.lowering.sizes import NAMES as SIZE_NAMES
from sparsecomp.lowering.sizes import result_dims
from sparsecomp.script.body import Body, combine, identity
from sparsecomp.script.parse import (
    Access,
    Call,
    Definition,
    Name,
    Node,
    Op,
    ScriptError,
    Statement,
    bind_types,
)
from sparsecomp.script.types import Scalar, TensorType, encoding_text

si: Any = sparse_iter  # generated at run time from the .td; untyped
_ITERATOR = {kind: f"#linalg.iterator_type<{kind}>" for kind in ("parallel", "reduction")}


def accesses(e: Any) -> list[Access]:
    """The tensor elements an expression reads, in order, each once."""
    if isinstance(e, Access):
        return [e]
    found: list[Access] = []
    for arg in e.args if isinstance(e, Op) else ():
        for a in accesses(arg):
            if (a.tensor, a.indices) not in [(b.tensor, b.indices) for b in found]:
                found.append(a)
    return found


def names(e: Any) -> list[Name]:
    if isinstance(e, Name):
        return [e]
    return [n for arg in (e.args if isinstance(e, Op) else ()) for n in names(arg)]


class FunctionEmitter:
    """Emits one kernel's ``func.func`` into a module (see the module docstring)."""

    def __init__(self, module: ModuleEmitter, d: Definition, types: dict[str, Scalar]) -> None:
        self.module, self.d, self.types = module, d, types
        self.env: dict[str, ir.Value] = {}
        self.symbols: dict[str, tuple[ir.Value, int]] = {}  # size symbol -> (tensor, dim)
        self.pool: dict[tuple[str, Any], ir.Value] = {}  # the function's constants
        self.entry: ir.Block | None = None

    def constant(self, make: Any, key: tuple[str, Any]) -> ir.Value:
        """A constant of the function, made once, kept with the others at the top of
        its body (index constants, then values, as a hand-written function has them,
        so that its text after sparsecomp-cleanup matches one written in MLIR)."""
        if key not in self.pool:
            assert self.entry is not None
            ops = list(self.entry.operations)
            first = next((op for op in ops if op.name != "arith.constant"), None)
            with ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(self.entry):
                self.pool[key] = make()
        return self.pool[key]

    # -- helpers ---------------------------------------------------------------------
    def loc(self, at: Node) -> ir.Location:
        return ir.Location.file(self.d.filename, at.line, at.col)

    def fail(self, at: Node, message: str, hint: str | None = None) -> ScriptError:
        return ScriptError(message, location=f"{self.d.filename}:{at.line}:{at.col}", hint=hint)

    def tensor_type(self, t: TensorType, shape: list[int] | None = None) -> ir.RankedTensorType:
        elt = ir.Type.parse(t.element(self.types).name)
        dims = shape or [
            d if isinstance(d, int) else self.module.sizes.get(d, ir.ShapedType.get_dynamic_size())
            for d in t.shape
        ]
        enc = self.encoding(t.encoding, self.d.at, len(dims)) if t.encoding else None
        if any(d < 0 and d != ir.ShapedType.get_dynamic_size() for d in dims):
            raise self.fail(self.d.at, f"a tensor of shape {t.shape}: sizes are >= 0")
        try:
            return ir.RankedTensorType.get(dims, elt, enc)
        except ir.MLIRError as e:  # an encoding of another rank than the shape's
            detail = " ".join(d.message for d in e.error_diagnostics) or str(e)
            raise self.fail(
                self.d.at,
                f"a tensor of shape {t.shape} cannot take encoding '{t.encoding}': "
                f"{detail.strip()}",
            ) from None

    def encoding(self, text: str, at: Node, rank: int = 2) -> ir.Attribute:
        """An annotation's encoding as an attribute; a located error if it does not parse."""
        try:
            return ir.Attribute.parse(encoding_text(text, rank))
        except (ir.MLIRError, SparsecompError) as e:
            detail = e.message if isinstance(e, SparsecompError) else str(e).splitlines()[-1]
            raise self.fail(at, f"encoding '{text}' is not valid: {detail.strip()}") from None

    def param_type(self, p: TensorType | Scalar | str) -> ir.Type:
        """A parameter's type; an ``f16`` scalar is taken as ``f32`` (C passes no half
        by value) and rounded to ``f16`` on entry (:meth:`scalar_param`)."""
        if isinstance(p, TensorType):
            return self.tensor_type(p)
        name = (self.types[p] if isinstance(p, str) else p).name
        return ir.Type.parse("f32" if name == "f16" else name)

    def scalar_param(self, p: TensorType | Scalar | str, arg: ir.Value) -> ir.Value:
        """The value of parameter ``p`` in the body: an ``f16`` scalar rounded from the
        ``f32`` it is passed as."""
        if isinstance(p, TensorType) or (self.types[p] if isinstance(p, str) else p).name != "f16":
            return arg
        with ir.InsertionPoint(self.entry), arg.location:
            return arith.truncf(ir.F16Type.get(), arg)

    def result_annotation(self, name: str) -> TensorType | None:
        """The declared type of result ``name`` (``E: Tensor[...]``, or the return
        annotation where it is returned)."""
        if name in self.d.declared:
            return self.d.declared[name]
        if name in self.d.returns and self.d.results:
            i = self.d.returns.index(name)
            return self.d.results[i] if i < len(self.d.results) else None
        return None

    # -- the function --------------------------------------------------------------------
    def emit(self, name: str, private: bool) -> func.FuncOp:
        params = list(self.d.params.items())
        inputs = [self.param_type(p) for _, p in params]
        f = func.FuncOp(name, (inputs, []), loc=self.loc(self.d.at))
        if private:
            f.attributes["sym_visibility"] = ir.StringAttr.get("private")
        entry = f.add_entry_block()
        self.entry = entry
        self.same: list[tuple[tuple[int, int], tuple[int, int]]] = []
        self.first: dict[str, tuple[int, int]] = {}
        for number, ((pname, p), arg) in enumerate(zip(params, entry.arguments, strict=True)):
            self.env[pname] = self.scalar_param(p, arg)
            if isinstance(p, TensorType):
                for dim, sym in enumerate(p.shape):
                    if isinstance(sym, str):
                        self.symbols.setdefault(sym, (arg, dim))
                        self.same_size(sym, number, dim)
        with ir.InsertionPoint(entry):
            for s in self.d.body:
                if isinstance(s, Statement):
                    self.statement(s)
                else:
                    self.call(s)
            results = []
            for r in self.d.returns:
                if r not in self.env or (r in self.d.params and r not in self.assigned()):
                    raise self.fail(
                        self.d.at, f"kernel '{self.d.name}' returns '{r}', which it never assigns"
                    )
                results.append(self.env[r])
            func.ReturnOp(results)
        if self.d.results and len(self.d.results) != len(results):
            raise self.fail(
                self.d.at,
                f"kernel '{self.d.name}' declares {len(self.d.results)} result(s) and "
                f"returns {len(results)}",
            )
        ftype = ir.FunctionType.get(inputs, [v.type for v in results])
        f.attributes["function_type"] = ir.TypeAttr.get(ftype)
        self.declared_result_sizes(f, results)
        tied = self.tied()
        same = [ir.DenseI64ArrayAttr.get([*a, *b]) for a, b in self.same if not tied(a, b)]
        if same:
            f.attributes[SAME_SIZES] = ir.ArrayAttr.get(same)
        if self.first:  # the symbols' names, for the runtime's size errors
            f.attributes[SIZE_NAMES] = ir.DictAttr.get(
                {sym: ir.DenseI64ArrayAttr.get([*at]) for sym, at in self.first.items()}
            )
        return f

    def declared_result_sizes(self, f: func.FuncOp, results: list[ir.Value]) -> None:
        """A declared result size that another argument dimension gives the result (one
        returned from a call: ``r = row_sums(A)`` declared ``"N"``, its size ``A``'s
        rows) is that symbol's size too, checked at each call (it was not: the result
        came back with the callee's size)."""
        for value, declared in zip(results, self.d.results or [], strict=False):
            if not isinstance(declared, TensorType) or not isinstance(
                value.type, ir.RankedTensorType
            ):
                continue
            dims = result_dims(f.operation, value)
            for sym, size in zip(declared.shape, dims, strict=False):
                if isinstance(sym, str) and isinstance(size, tuple) and size[0] >= 0:
                    self.same_size(sym, *size)

    def same_size(self, symbol: str, argument: int, dim: int) -> None:
        """Argument ``argument``'s dimension ``dim`` has size ``symbol``: one symbol is one
        size, which the runtime checks at each call (``sparse_iter.same_sizes``, where
        no loop of the kernel indexes both dimensions: the lowering records those)."""
        if symbol in self.first and self.first[symbol] != (argument, dim):
            self.same.append((self.first[symbol], (argument, dim)))
        self.first.setdefault(symbol, (argument, dim))

    def tied(self) -> Any:
        """``tied(a, b)``: whether one index variable of a statement indexes argument
        dimensions ``a`` and ``b`` (through others: union-find over the statements)."""
        number = {name: n for n, name in enumerate(self.d.params)}
        parent: dict[tuple[int, int], tuple[int, int]] = {}

        def find(x: tuple[int, int]) -> tuple[int, int]:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for st in self.d.body:
            if not isinstance(st, Statement):
                continue
            by_var: dict[str, tuple[int, int]] = {}
            targets = [Access(st.target, st.indices, st.at), *accesses(st.value)]
            for a in targets:
                if a.tensor not in number:
                    continue
                for dim, var in enumerate(a.indices):
                    key = (number[a.tensor], dim)
                    if var in by_var:
                        parent[find(key)] = find(by_var[var])
                    by_var.setdefault(var, key)
        return lambda a, b: find(a) == find(b)

    def assigned(self) -> set[str]:
        out: set[str] = set()
        for s in self.d.body:
            out |= {s.target} if isinstance(s, Statement) else set(s.targets)
        return out

    # -- statements ---------------------------------------------------------------------
    def statement(self, s: Statement) -> None:
        with self.loc(s.at):
            reads = accesses(s.value)
            for a in reads:
                if a.tensor == s.target and a.tensor not in self.env:
                    raise self.fail(
                        a.at,
                        f"'{a.tensor}' is the new result this statement defines: it has no "
                        "value to read yet",
                        hint=f"a reduction into it is written {a.tensor}[...] += expr (*=), or "
                        f"{a.tensor}[...] = max({a.tensor}[...], expr) with the result first",
                    )
                self.check_access(a)
            existing = self.env.get(s.target)
            if existing is not None and not isinstance(existing.type, ir.RankedTensorType):
                raise self.fail(s.at, f"'{s.target}' is a scalar argument: it has no elements")
            # a read of the target at its own indices is its value as the statement
            # starts: the out argument where the statement does not reduce, an input
            # where it does (there the out argument is the running total)
            reduces = any(v not in s.indices for a in reads for v in a.indices)
            own = [
                a
                for a in reads
                if existing is not None
                and not reduces
                and (a.tensor, a.indices) == (s.target, s.indices)
            ]
            inputs = [a for a in reads if a not in own]
            loops = list(s.indices)
            for v in (i for a in inputs for i in a.indices):
                if v not in loops:
                    loops.append(v)
            reduced = loops[len(s.indices) :]
            if reduced and s.reduce is None:
                raise self.fail(
                    s.at,
                    f"index variable(s) {', '.join(reduced)} appear only on the right",
                    hint="reduce over them: write += (sum), *= (product), or "
                    "T[...] = max(T[...], expr)",
                )
            out = existing if existing is not None else self.new_output(s, inputs, loops)
            self.check_rank(s.target, ir.RankedTensorType(out.type), s.indices, s.at)
            self.generic(s, inputs, own, loops, out)
            ann = self.result_annotation(s.target) if existing is None else None
            if ann is not None and ann.encoding and s.reduce not in (None, "add"):
                dense = ir.RankedTensorType(self.env[s.target].type)
                enc = self.encoding(ann.encoding, s.at, dense.rank)
                sparse = ir.RankedTensorType.get(dense.shape, dense.element_type, enc)
                upstream = str(enc).startswith("#sparse_tensor")
                convert = sparse_tensor.convert if upstream else si.set_encoding
                self.env[s.target] = convert(sparse, self.env[s.target])

    def check_access(self, a: Access) -> None:
        if a.tensor not in self.env:
            raise self.fail(a.at, f"'{a.tensor}' is not a tensor argument or an earlier result")
        t = self.env[a.tensor].type
        if not isinstance(t, ir.RankedTensorType):
            raise self.fail(a.at, f"'{a.tensor}' is a scalar: use it without a subscript")
        self.check_rank(a.tensor, ir.RankedTensorType(t), a.indices, a.at)

    def check_rank(self, name: str, t: ir.RankedTensorType, idx: tuple[str, ...], at: Node) -> None:
        if t.rank != len(idx):
            raise self.fail(at, f"'{name}' has {t.rank} dimension(s), subscripted with {len(idx)}")

    def element_type(self, s: Statement, inputs: list[Access]) -> ir.Type:
        ann = self.result_annotation(s.target)
        if ann is not None:
            return ir.Type.parse(ann.element(self.types).name)
        for a in inputs:
            return ir.RankedTensorType(self.env[a.tensor].type).element_type
        for n in names(s.value):
            if n.name in self.env:
                return self.env[n.name].type
        raise self.fail(
            s.at,
            f"cannot tell the element type of '{s.target}'",
            hint="annotate the kernel's result: -> Tensor[f32, ...]",
        )

    def new_output(self, s: Statement, inputs: list[Access], loops: list[str]) -> ir.Value:
        ann = self.result_annotation(s.target)
        if ann is not None and len(ann.shape) != len(s.indices):
            raise self.fail(
                s.at,
                f"'{s.target}' is declared with {len(ann.shape)} dimension(s) "
                f"{ann.shape}, assigned with {len(s.indices)}",
            )
        elt = self.element_type(s, inputs)
        sources: list[tuple[ir.Value | None, int | None]] = []
        for pos, var in enumerate(s.indices):
            source = self.extent(var, inputs, ann, pos)
            sym = ann.shape[pos] if ann is not None else None
            if (
                isinstance(sym, str)
                and source is not None
                and source[1] is not None
                and isinstance(source[0], ir.BlockArgument)
                and source[0].owner == self.entry
            ):  # sized by an input: it must have the declared size
                self.same_size(sym, ir.BlockArgument(source[0]).arg_number, source[1])
            if source is None:
                raise self.fail(
                    s.at,
                    f"cannot tell the size of index variable '{var}' of '{s.target}'",
                    hint="read it from an input, or annotate the result's shape "
                    "with size symbols of the arguments",
                )
            sources.append(source)
        # the dims' index constants first, then the dims, as a hand-written function has them
        dynamic = sorted(
            {d for v, d in sources if v is not None and d is not None and _dynamic(v, d)}
        )
        constants = {d: self.constant(lambda d=d: _index(d), ("index", d)) for d in dynamic}
        mixed: list[int | ir.Value] = []
        for value, dim in sources:
            if value is None:  # a static size the annotation gives
                mixed.append(dim)
                continue
            if dim is None:  # a size argument
                mixed.append(value)
                continue
            static = ir.RankedTensorType(value.type).shape[dim]
            mixed.append(tensor.dim(value, constants[dim]) if _dynamic(value, dim) else static)
        enc = self.encoding(ann.encoding, s.at, len(mixed)) if ann and ann.encoding else None
        reduce = s.reduce
        if reduce is None or (enc is not None and reduce == "add"):
            return tensor.empty(mixed, elt, encoding=enc)
        # a product, max or min starts from its identity, everywhere: computed dense, and
        # a sparse result keeps the nonzeros of that (:meth:`statement` converts it)
        start = self.constant(lambda: identity(reduce, elt), (str(elt), reduce))
        return linalg.fill(start, outs=[tensor.empty(mixed, elt)])

    def extent(
        self, var: str, inputs: list[Access], ann: TensorType | None, pos: int
    ) -> tuple[ir.Value | None, int | None] | None:
        """Where the size of ``var`` (dimension ``pos`` of a new result) comes from:
        ``(None, n)`` for a static size ``n`` the annotation gives, an ``index``
        argument the result's declared shape names, else the first input ``var``
        indexes, else an argument with the declared size symbol."""
        sym = ann.shape[pos] if ann is not None else None
        if isinstance(sym, int):  # a static size: the result's type has it (the size
            return None, sym  # checks compare it with the inputs' at run time)
        if isinstance(sym, str) and isinstance(self.env.get(sym), ir.Value):
            if isinstance(self.env[sym].type, ir.IndexType):
                return self.env[sym], None
        for a in inputs:
            if var in a.indices:
                return self.env[a.tensor], a.indices.index(var)
        if ann is not None and isinstance(ann.shape[pos], str):
            return self.symbols.get(ann.shape[pos])  # type: ignore[arg-type]
        return None

    def generic(
        self, s: Statement, inputs: list[Access], own: list[Access], loops: list[str], out: ir.Value
    ) -> None:
        def amap(idx: tuple[str, ...]) -> ir.AffineMap:
            exprs = [ir.AffineDimExpr.get(loops.index(i)) for i in idx]
            return ir.AffineMap.get(len(loops), 0, exprs)

        maps = [amap(a.indices) for a in inputs] + [amap(s.indices)]
        kinds = ["parallel"] * len(s.indices) + ["reduction"] * (len(loops) - len(s.indices))
        op = linalg.GenericOp(
            [out.type],
            [self.env[a.tensor] for a in inputs],
            [out],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse(_ITERATOR[k]) for k in kinds]),
        )
        elts = [ir.RankedTensorType(v.type).element_type for v in (*op.inputs, out)]
        block = op.regions[0].blocks.append(*elts)
        elements = {
            (a.tensor, a.indices): arg for a, arg in zip(inputs, block.arguments, strict=False)
        }
        for a in own:
            elements[(a.tensor, a.indices)] = block.arguments[-1]
        scalars = {k: v for k, v in self.env.items() if not isinstance(v.type, ir.ShapedType)}
        with ir.InsertionPoint(block):
            body = Body(elements, scalars, loops, elts[-1], self.fail, self.loc)
            value = body.emit(s.value, elts[-1])
            bit = ir.IntegerType.get_signless(1)
            if value.type == bit and elts[-1] != bit:
                raise self.fail(
                    s.at,
                    f"the value is a comparison (true or false), but '{s.target}' holds {elts[-1]}",
                    hint="select numbers with it: 1.0 if A[i, j] > 0.0 else 0.0",
                )
            if value.type != elts[-1]:  # before the reduction combines the two
                raise self.fail(
                    s.at,
                    f"the value is {value.type}, but '{s.target}' holds {elts[-1]}",
                    hint=f"convert it, {s.target}[...] = {elts[-1]}(expr), or declare the "
                    "result with the value's type",
                )
            if s.reduce is not None:
                value = combine(s.reduce, block.arguments[-1], value)
            linalg.YieldOp([value])
        self.env[s.target] = op.result

    # -- calls ----------------------------------------------------------------------------
    def call_values(self, c: Call) -> list[ir.Value]:
        """A call's argument values: names' values, and numbers (written, or the callee's
        defaults) as constants of their parameter's type."""
        callee = c.kernel.definition
        for (name, p), a in zip(callee.params.items(), c.args, strict=True):
            if not isinstance(a, str):
                continue
            tensor = isinstance(self.env[a].type, ir.RankedTensorType)
            if tensor != isinstance(p, TensorType):  # the verifier's text said it, unlocated
                want, got = ("a tensor", "a number") if not tensor else ("a number", "a tensor")
                raise self.fail(c.at, f"'{callee.name}' takes {want} as '{name}', and '{a}' "
                                f"is {got}")  # fmt: skip
        named = [_element_name(self.env[a]) if isinstance(a, str) else None for a in c.args]
        try:
            types = bind_types(callee, named)
        except SparsecompError as e:  # its hint is for calls from Python (.astype)
            raise self.fail(c.at, f"in the call of '{callee.name}': {e.message}") from None
        values = []
        for (name, p), a in zip(callee.params.items(), c.args, strict=True):
            if isinstance(a, str):
                values.append(self.env[a])
                continue
            if isinstance(p, TensorType):
                raise self.fail(c.at, f"'{callee.name}' takes a tensor as '{name}', not a number")
            if isinstance(p, str) and p not in types:
                raise self.fail(c.at, f"the number given as '{name}' binds no type to '{p}'",
                                hint="pass a name of a scalar argument instead")  # fmt: skip
            t = self.param_type(p)
            exact = isinstance(t, ir.FloatType) or float(a.value).is_integer()
            if not exact:
                raise self.fail(c.at, f"'{name}' is {t}, given {a.value!r}")
            value = float(a.value) if isinstance(t, ir.FloatType) else int(a.value)
            values.append(self.constant(lambda t=t, v=value: arith.constant(t, v),
                                        (str(t), value)))  # fmt: skip
        return values

    def check_layouts(self, c: Call, f: func.FuncOp, values: list[ir.Value]) -> None:
        """A located error for an argument whose layout is not the callee's parameter's
        (a csr tensor for a csc parameter): a call converts nothing."""
        callee = c.kernel.definition
        for (name, p), a, value, want in zip(
            callee.params.items(), c.args, values, f.type.inputs, strict=True
        ):
            if value.type == want or not isinstance(p, TensorType):
                continue
            mine = self.d.params.get(a) if isinstance(a, str) else None
            have = mine.encoding if isinstance(mine, TensorType) else None
            raise self.fail(
                c.at,
                f"'{callee.name}' takes '{name}' as {p.encoding or 'dense'}, and "
                f"'{a}' here is {have or 'dense' if mine is not None else value.type}",
                hint="a call inside a kernel converts no layout: declare the argument in the "
                "callee's layout, or call the two kernels from Python (which converts)",
            )

    def call(self, c: Call) -> None:
        with self.loc(c.at):
            callee = c.kernel.definition
            for a in c.args:
                if isinstance(a, str) and a not in self.env:
                    raise self.fail(c.at, f"'{a}' is not an argument or an earlier result")
            values = self.call_values(c)
            f = self.module.callee(c.kernel, values)
            self.check_layouts(c, f, values)
            results = f.type.results
            if len(results) != len(c.targets):
                raise self.fail(
                    c.at,
                    f"'{callee.name}' returns {len(results)} value(s), bound to {len(c.targets)}",
                )
            done = func.CallOp(results, ir.FlatSymbolRefAttr.get(f.sym_name.value), values)
            for name, value in zip(c.targets, done.results, strict=True):
                self.env[name] = value


def _element_name(value: ir.Value) -> str:
    t = value.type
    return str(ir.RankedTensorType(t).element_type if isinstance(t, ir.RankedTensorType) else t)


def _dynamic(value: ir.Value, dim: int) -> bool:
    return ir.ShapedType.is_dynamic_size(ir.RankedTensorType(value.type).shape[dim])


def _index(i: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), i)


class ModuleEmitter:
    """A module holding kernels (in the order given, each public unless declared
    private) and the kernels they call (private, emitted once per
    specialization, where they are not among the given ones)."""

    def __init__(self, sizes: dict[str, int] | None = None) -> None:
        self.sizes = dict(sizes or {})
        self.module = ir.Module.create()
        self.emitted: dict[tuple[Any, ...], func.FuncOp] = {}
        self.listed: dict[str, Any] = {}

    def kernel(self, d: Definition, types: dict[str, Scalar], private: bool = False) -> func.FuncOp:
        return self.ensure(d, types, private, listed=True)

    def kernels(self, kernels: list[Any], types: dict[str, Scalar]) -> list[func.FuncOp]:
        """Emit ``kernels`` (``Kernel`` objects) into the module in this order; their functions."""
        self.listed = {k.definition.name: k for k in kernels}
        done = [self.ensure(k.definition, types, k.private, listed=True) for k in kernels]
        last = None
        for f in done:  # the given order (a caller may have emitted its callee first)
            if last is None:
                f.operation.move_before(self.module.body.operations[0])
            else:
                f.operation.move_after(last)
            last = f.operation
        return done

    def ensure(
        self, d: Definition, types: dict[str, Scalar], private: bool, listed: bool
    ) -> func.FuncOp:
        key = (d.name, tuple(sorted((k, v.name) for k, v in types.items())))
        if key not in self.emitted:
            suffix = "" if listed else "".join(f"_{v.name}" for _, v in sorted(types.items()))
            with ir.InsertionPoint(self.module.body):
                f = FunctionEmitter(self, d, types).emit(d.name + suffix, private)
            for name, text in d.attributes.items():
                f.attributes[name] = ir.Attribute.parse(text)
            self.emitted[key] = f
        return self.emitted[key]

    def callee(self, kernel: Any, args: list[ir.Value]) -> func.FuncOp:
        d = kernel.definition
        elements = [
            ir.RankedTensorType(a.type).element_type
            if isinstance(a.type, ir.RankedTensorType)
            else a.type
            for a in args
        ]
        types = bind_types(d, [str(e) for e in elements])
        listed = self.listed.get(d.name) is kernel
        return self.ensure(d, types, kernel.private or not listed, listed)
