"""A ``@loops`` function's Python, built into MLIR with the bindings (statement by statement).

The subset is described in :mod:`.loops`; this module reads the function's
syntax tree and creates one operation per operator, call, subscript and
statement, at the current insertion point, located at its Python line.

Python's own rules decide the loop-carried values: a variable bound before a
``for`` loop and bound again in its body is carried (in the order the
variables were bound before the loop) and names the loop's result after it;
a variable that both branches of an ``if`` bind (or one of them, where it was
bound before) is a result of the ``scf.if`` (in the order the ``then``
branch binds them). Values bound inside a loop or a branch are not seen after
it.
"""

from __future__ import annotations

import ast
from typing import Any

from mlir import ir

from sparsecomp.script.parse import ScriptError

FLOAT_OPS = {
    ast.Add: "arith.addf",
    ast.Sub: "arith.subf",
    ast.Mult: "arith.mulf",
    ast.Div: "arith.divf",
}
INT_OPS = {
    ast.Add: "arith.addi", ast.Sub: "arith.subi", ast.Mult: "arith.muli",
    ast.BitAnd: "arith.andi", ast.BitOr: "arith.ori", ast.BitXor: "arith.xori",
}  # fmt: skip
FCMP = {ast.Gt: 2, ast.GtE: 3, ast.Lt: 4, ast.LtE: 5, ast.Eq: 1, ast.NotEq: 13}
ICMP = {ast.Eq: 0, ast.NotEq: 1, ast.Lt: 2, ast.LtE: 3, ast.Gt: 4, ast.GtE: 5}
MATH = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "absf")
SCALARS = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")
SUBSET = (
    "statements x = expr, x, y = a, b, t[i, j] = v, for i in range(lo, hi, step), if/else, "
    "def region(...) (a region of an op), op(...), return; expressions of names, "
    "+ - * / & | ^, unary -, one comparison, t[i, j], dim(t, d), where(c, a, b), max, min, "
    f"{', '.join(MATH)}, index(x), uindex(x), typed constants {', '.join(SCALARS)}(number), "
    "index(number), and op('dialect.name', operands..., types=[...], attrs={...}, regions=[...])"
)


def _is_float(t: Any) -> bool:
    element = ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t
    return isinstance(element, ir.FloatType)


class FunctionEmitter:
    """Emits one ``@loops`` function (a :class:`~.loops.LoopKernel`) into a module."""

    def __init__(self, kernel: Any) -> None:
        self.k = kernel
        self.env: dict[str, ir.Value] = {}
        self.seq: dict[str, int] = {}
        self.count = 0
        self.regions: dict[str, ast.FunctionDef] = {}
        self.fastmath = ir.Attribute.parse(f"#arith.fastmath<{kernel.fastmath or 'none'}>")

    # -- helpers ----------------------------------------------------------------------------
    def loc(self, node: Any) -> ir.Location:
        return ir.Location.file(
            self.k.filename, self.line(node), node.col_offset + 1 + self.k.indent
        )

    def line(self, node: Any) -> int:
        return self.k.first_line + node.lineno - 1

    def error(self, node: Any, message: str, hint: str | None = None) -> ScriptError:
        where = f"{self.k.filename}:{self.line(node)}:{node.col_offset + 1 + self.k.indent}"
        return ScriptError(message, location=where, hint=hint)

    def bind(self, name: str, value: ir.Value) -> None:
        self.count += 1
        self.env[name] = value
        self.seq[name] = self.count

    def create(
        self,
        node: ast.AST,
        name: str,
        operands: list[ir.Value],
        results: list[ir.Type] | None = None,
        attrs: dict[str, ir.Attribute] | None = None,
        regions: int = 0,
    ) -> ir.Operation:
        return ir.Operation.create(
            name,
            results=results or [],
            operands=operands,
            attributes=attrs or {},
            regions=regions,
            loc=self.loc(node),
        )

    def type(self, node: ast.AST, text: Any) -> ir.Type:
        if not isinstance(text, str):
            raise self.error(node, "a type is MLIR type text, such as 'tensor<?xf32>'")
        try:
            return ir.Type.parse(text)
        except ir.MLIRError as e:
            raise self.error(node, f"'{text}' is not an MLIR type: {e}") from None

    # -- the function -------------------------------------------------------------------------
    def emit(self) -> ir.Operation:
        k = self.k
        tree = k.tree
        params = [self.type(a, t) for a, t in zip(tree.args.args, k.params, strict=True)]
        results = [self.type(tree, t) for t in k.results]
        ftype = ir.FunctionType.get(params, results)
        attrs = {
            "sym_name": ir.StringAttr.get(k.__name__),
            "function_type": ir.TypeAttr.get(ftype),
        }
        if k.private:
            attrs["sym_visibility"] = ir.StringAttr.get("private")
        for name, text in k.attrs.items():
            attrs[name] = self.attribute(tree, text)
        f = self.create(tree, "func.func", [], attrs=attrs, regions=1)
        entry = f.regions[0].blocks.append(*params, arg_locs=[self.loc(tree)] * len(params))
        for a, value in zip(tree.args.args, entry.arguments, strict=True):
            self.bind(a.arg, value)
        body = [s for s in tree.body if not _is_docstring(s)]
        if not body or not isinstance(body[-1], ast.Return):
            raise self.error(tree, f"function '{k.__name__}' must end in return")
        with ir.InsertionPoint(entry):
            self.statements(body)
        return f

    def attribute(self, node: ast.AST, text: Any) -> ir.Attribute:
        if not isinstance(text, str):
            raise self.error(node, "an attribute is MLIR attribute text, such as '1 : index'")
        try:
            return ir.Attribute.parse(text)
        except ir.MLIRError as e:
            raise self.error(node, f"'{text}' is not an MLIR attribute: {e}") from None

    # -- statements ----------------------------------------------------------------------------
    def statements(self, body: list[ast.stmt]) -> None:
        for s in body:
            self.statement(s)

    def statement(self, s: ast.stmt) -> None:
        if _is_docstring(s) or isinstance(s, ast.Pass):
            return
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            self.assign(s.targets[0], s.value)
        elif isinstance(s, ast.Expr) and _is_op_call(s.value):
            results = self.generic(s.value)  # type: ignore[arg-type]
            if results:
                raise self.error(s, "an op with results is assigned to names")
        elif isinstance(s, ast.For):
            self.loop(s)
        elif isinstance(s, ast.If):
            self.branch(s)
        elif isinstance(s, ast.Return):
            values = [] if s.value is None else self.values(s.value)
            if len(values) != len(self.k.results):
                raise self.error(s, f"'{self.k.__name__}' returns {len(self.k.results)} value(s)")
            self.create(s, "func.return", values)
        elif isinstance(s, ast.FunctionDef):
            self.regions[s.name] = s
        else:
            raise self.error(s, "not a statement of the loop subset", hint=SUBSET)

    def values(self, node: ast.expr) -> list[ir.Value]:
        if isinstance(node, ast.Tuple):
            return [self.expr(e) for e in node.elts]
        return [self.expr(node)]

    def assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if _is_op_call(value):
                results = self.generic(value)  # type: ignore[arg-type]
                if len(results) != 1:
                    raise self.error(value, f"the op has {len(results)} results")
                self.bind(target.id, results[0])
            else:
                self.bind(target.id, self.expr(value))
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            names = [e.id for e in target.elts]  # type: ignore[attr-defined]
            found = self.generic(value) if _is_op_call(value) else self.values(value)  # type: ignore[arg-type]
            if len(found) != len(names):
                raise self.error(value, f"{len(names)} names for {len(found)} values")
            for n, v in zip(names, found, strict=True):
                self.bind(n, v)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.store(target, value)
        else:
            raise self.error(target, "assign to a name, names, or t[i, j]", hint=SUBSET)

    def store(self, target: ast.Subscript, node: ast.expr) -> None:
        name = target.value.id  # type: ignore[attr-defined]
        base = self.lookup(target.value)  # type: ignore[arg-type]
        element = (
            ir.ShapedType(base.type).element_type if isinstance(base.type, ir.ShapedType) else None
        )
        value = self.expr(node, element)
        idx = self.indices(target)
        if isinstance(base.type, ir.MemRefType):
            self.create(target, "memref.store", [value, base, *idx])
        elif isinstance(base.type, ir.RankedTensorType):
            op = self.create(target, "tensor.insert", [value, base, *idx], [base.type])
            self.bind(name, op.result)
        else:
            raise self.error(target, f"'{name}' is neither a tensor nor a memref")

    def loop(self, s: ast.For) -> None:
        it = s.iter
        if (
            not isinstance(s.target, ast.Name)
            or not isinstance(it, ast.Call)
            or not isinstance(it.func, ast.Name)
            or it.func.id != "range"
            or not 1 <= len(it.args) <= 3
            or s.orelse
        ):
            raise self.error(s, "a loop is 'for i in range(lo, hi, step):' (no else)", hint=SUBSET)
        attrs = self.keywords(it, {"attrs"}).get("attrs")
        bounds = it.args if len(it.args) > 1 else [ast.Constant(0), it.args[0]]
        if len(bounds) == 2:
            bounds = [*bounds, ast.Constant(1)]
        found = [None if isinstance(b, ast.Constant) else self.expr(b) for b in bounds]
        like = next((v.type for v in found if v is not None), ir.IndexType.get())
        lo, hi, step = (
            v if v is not None else self.expr(ast.copy_location(b, it), like)
            for b, v in zip(bounds, found, strict=True)
        )
        carried = sorted(
            (n for n in _assigned(s.body, self.env) if n in self.env), key=lambda n: self.seq[n]
        )
        inits = [self.env[n] for n in carried]
        op = self.create(
            s, "scf.for", [lo, hi, step, *inits], [v.type for v in inits],
            self.attribute_dict(it, attrs), regions=1,
        )  # fmt: skip
        types = [lo.type, *[v.type for v in inits]]
        block = op.regions[0].blocks.append(*types, arg_locs=[self.loc(s)] * len(types))
        saved = dict(self.env)
        with ir.InsertionPoint(block):
            self.bind(s.target.id, block.arguments[0])
            for n, arg in zip(carried, list(block.arguments)[1:], strict=True):
                self.bind(n, arg)
            self.statements(s.body)
            out = [self.env[n] for n in carried]
            for n, v, init in zip(carried, out, inits, strict=True):
                if v.type != init.type:
                    raise self.error(
                        s, f"the loop changes the type of '{n}' ({init.type} -> {v.type})"
                    )
            self.create(s, "scf.yield", out)
        self.env = saved
        for n, r in zip(carried, op.results, strict=True):
            self.bind(n, r)

    def branch(self, s: ast.If) -> None:
        cond = self.expr(s.test)
        then, other = _assigned(s.body, self.env), _assigned(s.orelse, self.env)
        results = [n for n in then if n in other or n in self.env]
        results += [n for n in other if n not in then and n in self.env]
        tmp = self.create(s, "scf.if", [cond], regions=2)
        saved = dict(self.env)
        found = []
        for region, body in zip(tmp.regions, (s.body, s.orelse), strict=True):
            if body is s.orelse and not body and not results:
                break
            block = region.blocks.append()
            with ir.InsertionPoint(block):
                self.statements(body)
                out = [self.env[n] for n in results]
                self.create(s, "scf.yield", out)
            found.append(out)
            self.env = dict(saved)
        if not results:
            return
        types = [v.type for v in found[0]]
        if [v.type for v in found[1]] != types:
            raise self.error(s, "the branches bind values of different types")
        op = self.create(s, "scf.if", [cond], types, regions=2)
        for src, dst in zip(tmp.regions, op.regions, strict=True):
            src.blocks[0].append_to(dst)
        tmp.erase()
        for n, r in zip(results, op.results, strict=True):
            self.bind(n, r)

    # -- expressions -------------------------------------------------------------------------------
    def lookup(self, node: ast.Name) -> ir.Value:
        if node.id not in self.env:
            raise self.error(
                node,
                f"'{node.id}' is not bound here",
                hint="values bound in a loop or a branch are not seen after it; "
                "bind it before to carry it",
            )
        return self.env[node.id]

    def expr(self, node: ast.expr, like: ir.Type | None = None) -> ir.Value:
        if isinstance(node, ast.Name):
            return self.lookup(node)
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            if like is None:
                raise self.error(
                    node, "a number needs a type here", hint="write index(0), f32(1.0), i32(3)..."
                )
            return self.constant(node, node.value, like)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            if isinstance(node.operand, ast.Constant):
                negated: Any = node.operand.value
                return self.expr(ast.copy_location(ast.Constant(-negated), node), like)
            a = self.expr(node.operand, like)
            if not _is_float(a.type):
                raise self.error(node, "unary - of an integer: write 0 - x")
            return self.create(
                node, "arith.negf", [a], [a.type], {"fastmath": self.fastmath}
            ).result
        if isinstance(node, ast.BinOp):
            a, b = self.pair(node.left, node.right, like)
            table = FLOAT_OPS if _is_float(a.type) else INT_OPS
            op_kind: Any = type(node.op)
            if op_kind not in table:
                raise self.error(
                    node, f"operator {type(node.op).__name__} on {a.type}", hint=SUBSET
                )
            attrs = {"fastmath": self.fastmath} if table is FLOAT_OPS else {}
            if table[op_kind] in ("arith.addi", "arith.subi", "arith.muli"):
                attrs = {"overflowFlags": ir.Attribute.parse("#arith.overflow<none>")}
            return self.create(node, table[op_kind], [a, b], [a.type], attrs).result
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = self.pair(node.left, node.comparators[0], None)
            i1 = ir.IntegerType.get_signless(1)
            cmp_kind: Any = type(node.ops[0])
            if _is_float(a.type) and cmp_kind in FCMP:
                pred = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), FCMP[cmp_kind])
                nofm = ir.Attribute.parse("#arith.fastmath<none>")
                return self.create(
                    node, "arith.cmpf", [a, b], [i1], {"predicate": pred, "fastmath": nofm}
                ).result
            if cmp_kind in ICMP:
                pred = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), ICMP[cmp_kind])
                return self.create(node, "arith.cmpi", [a, b], [i1], {"predicate": pred}).result
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            base = self.lookup(node.value)
            idx = self.indices(node)
            kind = "memref.load" if isinstance(base.type, ir.MemRefType) else "tensor.extract"
            if not isinstance(base.type, ir.ShapedType):
                raise self.error(node, f"a subscript of {base.type}")
            return self.create(
                node, kind, [base, *idx], [ir.ShapedType(base.type).element_type]
            ).result
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self.call(node, like)
        raise self.error(node, "not an expression of the loop subset", hint=SUBSET)

    def pair(
        self, left: ast.expr, right: ast.expr, like: ir.Type | None
    ) -> tuple[ir.Value, ir.Value]:
        """Both operands; a number takes the other operand's type."""
        if isinstance(left, ast.Constant) and not isinstance(right, ast.Constant):
            b = self.expr(right, like)
            return self.expr(left, b.type), b
        a = self.expr(left, like)
        return a, self.expr(right, a.type)

    def indices(self, node: ast.Subscript) -> list[ir.Value]:
        s = node.slice
        items = s.elts if isinstance(s, ast.Tuple) else [s]
        return [self.expr(i, ir.IndexType.get()) for i in items]

    def constant(self, node: ast.AST, value: Any, t: ir.Type) -> ir.Value:
        if isinstance(t, ir.ShapedType):
            raise self.error(node, f"a number of type {t}: write op('arith.constant', ...)")
        if _is_float(t):
            attr = ir.FloatAttr.get(t, float(value))
        elif isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1:
            attr = ir.BoolAttr.get(bool(value))
        else:
            if not isinstance(value, int):
                raise self.error(node, f"{value!r} is not an integer of type {t}")
            attr = ir.IntegerAttr.get(t, value)
        return self.create(node, "arith.constant", [], [t], {"value": attr}).result

    def call(self, node: ast.Call, like: ir.Type | None) -> ir.Value:
        f = node.func.id  # type: ignore[attr-defined]
        args = node.args
        if f == "op":
            results = self.generic(node)
            if len(results) != 1:
                raise self.error(node, f"an op of {len(results)} results inside an expression")
            return results[0]
        if f in SCALARS or f == "index":
            if len(args) == 1 and _is_negative(args[0]):
                return self.constant(node, -args[0].operand.value, ir.Type.parse(f))  # type: ignore[attr-defined]
            if len(args) != 1 or not isinstance(args[0], ast.Constant):
                if f == "index" and len(args) == 1:
                    return self.cast(node, "arith.index_cast")
                raise self.error(
                    node,
                    f"{f}(number) is a constant; conversions are op('arith....', x, types=['{f}'])",
                )
            return self.constant(node, args[0].value, ir.Type.parse(f))
        if f == "uindex" and len(args) == 1:
            return self.cast(node, "arith.index_castui")
        if f == "dim" and len(args) == 2:
            t = self.expr(args[0])
            d = self.expr(args[1], ir.IndexType.get())
            kind = "memref.dim" if isinstance(t.type, ir.MemRefType) else "tensor.dim"
            return self.create(node, kind, [t, d], [ir.IndexType.get()]).result
        if f == "where" and len(args) == 3:
            c = self.expr(args[0])
            a, b = self.pair(args[1], args[2], like)
            return self.create(node, "arith.select", [c, a, b], [a.type]).result
        if f in ("max", "min") and len(args) == 2:
            a, b = self.pair(args[0], args[1], like)
            if _is_float(a.type):
                name = "arith.maximumf" if f == "max" else "arith.minimumf"
                return self.create(node, name, [a, b], [a.type], {"fastmath": self.fastmath}).result
            name = "arith.maxsi" if f == "max" else "arith.minsi"
            return self.create(node, name, [a, b], [a.type]).result
        if f in MATH and len(args) == 1:
            a = self.expr(args[0], like)
            return self.create(node, f"math.{f}", [a], [a.type], {"fastmath": self.fastmath}).result
        raise self.error(node, f"'{f}' is not a function of the loop subset", hint=SUBSET)

    def cast(self, node: ast.Call, name: str) -> ir.Value:
        a = self.expr(node.args[0])
        return self.create(node, name, [a], [ir.IndexType.get()]).result

    def keywords(self, node: ast.Call, allowed: set[str]) -> dict[str, Any]:
        """The call's keyword arguments, as Python literals."""
        out = {}
        for kw in node.keywords:
            if kw.arg not in allowed:
                raise self.error(
                    kw.value, f"keyword '{kw.arg}' (this call takes {', '.join(sorted(allowed))})"
                )
            if kw.arg == "regions":
                out[kw.arg] = kw.value
                continue
            try:
                out[kw.arg] = ast.literal_eval(kw.value)
            except ValueError:
                raise self.error(
                    kw.value, f"'{kw.arg}' is a literal (text, lists, dicts of text)"
                ) from None
        return out

    def attribute_dict(self, node: ast.AST, attrs: Any) -> dict[str, ir.Attribute]:
        if attrs is None:
            return {}
        if not isinstance(attrs, dict):
            raise self.error(node, "attrs is a dict: name -> MLIR attribute text")
        return {k: self.attribute(node, v) for k, v in attrs.items()}

    def generic(self, node: ast.Call) -> list[ir.Value]:
        """``op("dialect.name", operands..., types=[...], attrs={...}, regions=[...])``."""
        if (
            not node.args
            or not isinstance(node.args[0], ast.Constant)
            or not isinstance(node.args[0].value, str)
        ):
            raise self.error(node, "op(...) starts with the op's name: op('arith.addf', a, b, ...)")
        name = node.args[0].value
        operands = [self.expr(a) for a in node.args[1:]]
        kw = self.keywords(node, {"types", "attrs", "regions"})
        types = [self.type(node, t) for t in kw.get("types", [])]
        regions = kw.get("regions")
        region_names: list[str | None] = []
        if regions is not None:
            if not isinstance(regions, ast.List | ast.Tuple):
                raise self.error(node, "regions is a list of functions defined above (or None)")
            for r in regions.elts:
                if isinstance(r, ast.Constant) and r.value is None:
                    region_names.append(None)
                elif isinstance(r, ast.Name) and r.id in self.regions:
                    region_names.append(r.id)
                else:
                    raise self.error(
                        r, "a region is a function defined above in this body, or None"
                    )
        op = self.create(
            node,
            name,
            operands,
            types,
            self.attribute_dict(node, kw.get("attrs")),
            len(region_names),
        )
        for region, rname in zip(op.regions, region_names, strict=True):
            if rname is not None:
                self.region(region, self.regions[rname])
        return list(op.results)

    def region(self, region: Any, d: ast.FunctionDef) -> None:
        types = []
        for a in d.args.args:
            if not isinstance(a.annotation, ast.Constant):
                raise self.error(a, "a region's parameters are annotated with their MLIR types")
            types.append(self.type(a, a.annotation.value))
        block = region.blocks.append(*types, arg_locs=[self.loc(d)] * len(types))
        saved = dict(self.env)
        with ir.InsertionPoint(block):
            for a, value in zip(d.args.args, block.arguments, strict=True):
                self.bind(a.arg, value)
            self.statements(d.body)
        self.env = saved


def _is_docstring(s: ast.stmt) -> bool:
    return (
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Constant)
        and isinstance(s.value.value, str)
    )


def _is_negative(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    )


def _is_op_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "op"


def _assigned(body: list[ast.stmt], env: dict[str, ir.Value]) -> list[str]:
    """The names ``body`` binds, in order (tensor subscript assignments bind the
    tensor's name; nested loops and branches count; region functions do not)."""
    found: list[str] = []

    def add(name: str) -> None:
        if name not in found:
            found.append(name)

    for s in body:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                for e in elts:
                    if isinstance(e, ast.Name):
                        add(e.id)
                    elif isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
                        bound = env.get(e.value.id)
                        if bound is None or isinstance(bound.type, ir.RankedTensorType):
                            add(e.value.id)
        elif isinstance(s, ast.For | ast.If):
            for n in _assigned(s.body, env) + _assigned(s.orelse, env):
                add(n)
    return found
