"""Type specialization for ``sparse-iter-specialize-encodings``: which layout each value gets.

:class:`Specializer` walks a module in program order and replaces every
``#sparse_iter.sparsity`` / ``#sparse_iter.encoding`` tensor type by the layout
the target resolver (:mod:`sparsecomp.targets.resolve`) chooses, inserting
layout conversions where a use needs another layout. The pass docstring
states the rules.
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.errors import SparsecompError, TargetError
from sparsecomp.ir.attrs import encoding_of, mnemonic
from sparsecomp.ir.targets import TARGET_ATTR, function_target, module_targets
from sparsecomp.ir.walk import preorder as walk
from sparsecomp.targets.resolve import Encoding, IndexingMap, Target, Use, resolve
from sparsecomp.transforms.set_encodings import SET, indexing_maps, set_encoding, with_encoding

FUNC = "func.func"


class Failure(Exception):
    def __init__(self, message: str, loc: ir.Location) -> None:
        super().__init__(message)
        self.message, self.loc = message, loc


def _unresolved(ty: ir.Type) -> Encoding | None:
    """The host form of a ``#sparse_iter.sparsity``/``.encoding`` type encoding."""
    enc = encoding_of(ty)
    if enc is None or mnemonic(enc) not in ("sparsity", "encoding"):
        return None
    return Encoding.parse(str(enc))


def _linalg_use(op: ir.Operation, index: int) -> Use | None:
    maps = indexing_maps(op)
    if maps is None:
        return None
    types = [ir.ShapedType(v.type).element_type if isinstance(v.type, ir.ShapedType) else v.type
             for v in op.operands]  # fmt: skip
    return Use(op.name, index, tuple(map(str, types)),
               tuple(IndexingMap.parse(str(m)) for m in maps))  # fmt: skip


def _name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def _callee(op: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


class Specializer:
    """Resolves every unresolved tensor type of one module, in program order."""

    def __init__(self, module: ir.Operation, targets: dict[str, Target], densify: bool) -> None:
        ops = walk(module)
        self.funcs = {_name(f): f for f in ops if f.name == FUNC}
        self.targets, self.densify = targets, densify
        self.named = module_targets(module)
        self.conversions: dict[tuple[ir.Value, ir.Type], ir.Value] = {}
        self.order = {op: i for i, op in enumerate(ops)}
        self.sigs: dict[str, ir.FunctionType] = {}
        self.results: dict[str, list[ir.Type]] = {}
        self.busy: set[str] = set()
        self.was: dict[ir.Value, ir.Type] = {}

    # -- types -----------------------------------------------------------------
    def target(self, func: str, op: ir.Operation | None = None) -> Target:
        """The target of ``op``: its own ``sparse_iter.target``, else its function's."""
        if op is None or TARGET_ATTR not in op.attributes:
            return self.targets[func]
        name = ir.StringAttr(op.attributes[TARGET_ATTR]).value
        if name not in self.named:
            known = ", ".join(sorted(self.named)) or "none"
            raise Failure(
                f"unknown target '{name}' on {op.name}; the module's targets: {known}", op.location
            )
        return self.named[name]

    def layout_type(
        self,
        ty: ir.Type,
        enc: Encoding,
        func: str,
        loc: ir.Location,
        op: ir.Operation | None = None,
    ) -> ir.Type:
        rt = ir.RankedTensorType(ty)
        shape = [None if ir.ShapedType.is_dynamic_size(s) else s for s in rt.shape]
        try:
            layout = resolve(enc, shape, self.target(func, op), densify=self.densify)
        except SparsecompError as e:
            raise Failure(f"cannot resolve a layout for {ty}: {e.message}", loc) from e
        return with_encoding(ty, ir.Attribute.parse(layout.attr_text()), loc)

    def use_type(self, value: ir.Value, enc: Encoding, func: str) -> ir.Type | None:
        """The type the first use of ``value`` (in program order) that decides one wants."""
        uses = sorted(value.uses, key=lambda u: self.order.get(u.owner.operation, len(self.order)))
        for use in uses:
            user, i = use.owner.operation, use.operand_number
            if (linalg := _linalg_use(user, i)) is not None and not enc.use.op_name:
                return self.layout_type(value.type, Encoding(enc.sparsity, linalg), func,
                                        user.location, user)  # fmt: skip
            target = user.results[0].type if user.name == SET else None
            if target is not None and (wanted := _unresolved(target)) and wanted.use.op_name:
                return self.layout_type(target, wanted, func, user.location)
            if target is not None and mnemonic(encoding_of(target)) in ("layout", "composable"):
                return target
            sig = self.signature(_callee(user)) if user.name == "func.call" else None
            if sig is not None:
                return sig.inputs[i]
            if user.name == "func.return":
                return self.results[func][i]
            forwarded = [r for r in user.results if r.type == value.type]
            if user.name not in (SET, "func.call") and forwarded:  # tensor.cast and the like
                if (found := self.use_type(forwarded[0], enc, func)) is not None:
                    return found
        return None

    def value_type(self, value: ir.Value, func: str) -> ir.Type:
        """A value's own type, an encoding's layout, or a sparsity's first use's layout."""
        enc = _unresolved(value.type)
        if enc is None:
            return value.type
        if not enc.use.op_name and (found := self.use_type(value, enc, func)) is not None:
            return found
        return self.layout_type(value.type, enc, func, value.location)

    def set_type(self, value: ir.Value, ty: ir.Type) -> None:
        self.was.setdefault(value, value.type)
        value.set_type(ty)

    # -- functions -------------------------------------------------------------
    def signature(self, name: str) -> ir.FunctionType | None:
        """The resolved type of function ``name``; None while it is being resolved."""
        if name in self.sigs or name in self.busy or name not in self.funcs:
            return self.sigs.get(name)
        self.busy.add(name)
        func = self.funcs[name]
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        self.results[name] = [self._declared(t, name, func.location) for t in fty.results]
        body = func.regions[0].blocks
        if len(body):
            inputs = [self.value_type(a, name) for a in body[0].arguments]
        else:
            inputs = [self._declared(t, name, func.location) for t in fty.inputs]
        self.sigs[name] = ir.FunctionType.get(inputs, self.results[name])
        self.busy.discard(name)
        return self.sigs[name]

    def _declared(self, ty: ir.Type, func: str, loc: ir.Location) -> ir.Type:
        enc = _unresolved(ty)
        return ty if enc is None else self.layout_type(ty, enc, func, loc)

    def rewrite(self, name: str) -> None:
        func = self.funcs[name]
        sig = self.signature(name)
        assert sig is not None
        func.attributes["function_type"] = ir.TypeAttr.get(sig)
        blocks = func.regions[0].blocks
        if not len(blocks):
            return
        for arg, ty in zip(blocks[0].arguments, sig.inputs, strict=True):
            self.set_type(arg, ty)
        for block in list(blocks)[1:]:
            if any(_unresolved(a.type) for a in block.arguments):
                raise Failure(
                    "cannot specialize encodings of block arguments other than the "
                    "function's own; branch operands must keep matching types",
                    func.location,
                )
        for op in walk(func)[1:]:
            self.rewrite_op(op, name)

    # -- ops -------------------------------------------------------------------
    def convert(self, op: ir.Operation, index: int, ty: ir.Type) -> None:
        """Make operand ``index`` of ``op`` have type ``ty``, by a conversion if needed.

        One conversion per (value, layout), placed right after the value's
        definition (so it dominates every use) and shared by all its uses.
        """
        value = op.operands[index]
        if value.type == ty or encoding_of(ty) is None:
            return
        key = (value, ty)
        if key not in self.conversions:
            owner = value.owner
            if isinstance(owner, ir.Block):
                ip = ir.InsertionPoint.at_block_begin(owner)
            else:
                ip = ir.InsertionPoint.after(owner.operation)
            self.conversions[key] = set_encoding(value, ty, ip, op.location)
        op.operands[index] = self.conversions[key]

    def rewrite_op(self, op: ir.Operation, func: str) -> None:
        self._check_regions(op)
        if indexing_maps(op) is not None:
            self._rewrite_linalg(op, func)
        elif op.name == "func.call" and (sig := self.sigs.get(_callee(op))) is not None:
            for i, ty in enumerate(sig.inputs):
                self.convert(op, i, ty)
            for result, ty in zip(op.results, sig.results, strict=True):
                self.set_type(result, ty)
        elif op.name == "func.return":
            for i, ty in enumerate(self.sigs[func].results):
                self.convert(op, i, ty)
        elif op.name == SET:
            self._rewrite_set(op, func)
        else:
            self._rewrite_other(op, func)

    def _rewrite_linalg(self, op: ir.Operation, func: str) -> None:
        for i, value in enumerate(list(op.operands)):
            enc = _unresolved(self.was.get(value, value.type))
            if enc is None:
                continue
            if not enc.use.op_name:
                linalg = _linalg_use(op, i)
                assert linalg is not None
                enc = Encoding(enc.sparsity, linalg)
            self.convert(op, i, self.layout_type(value.type, enc, func, op.location, op))
        first_init = len(op.operands) - len(op.results)
        for j, result in enumerate(op.results):
            if _unresolved(result.type) is not None:
                self.set_type(result, op.operands[first_init + j].type)

    def _rewrite_set(self, op: ir.Operation, func: str) -> None:
        result, source = op.results[0], op.operands[0]
        enc = _unresolved(result.type)
        if enc is not None and not enc.use.op_name and encoding_of(source.type) is not None:
            self.set_type(result, source.type)  # sparsity after an encoded value: keep its layout
        elif enc is not None:
            self.set_type(result, self.value_type(result, func))
        if result.type == source.type:
            result.replace_all_uses_with(source)
            self.order.pop(op, None)
            op.erase()

    def _rewrite_other(self, op: ir.Operation, func: str) -> None:
        for result in op.results:
            if _unresolved(result.type) is None:
                continue
            same = [v for v in op.operands if self.was.get(v) == result.type]
            self.set_type(result, same[0].type if same else self.value_type(result, func))

    def _check_regions(self, op: ir.Operation) -> None:
        if op.name == FUNC or indexing_maps(op) is not None:
            return
        carried = [*op.results] + [a for r in op.regions for b in r.blocks for a in b.arguments]
        if len(op.regions) and any(_unresolved(v.type) for v in carried):
            raise Failure(
                f"cannot specialize encodings carried through '{op.name}' (results or region "
                "arguments); only func.func and linalg regions may carry unresolved encodings",
                op.location,
            )


def function_targets(module: ir.Operation, option: str) -> dict[str, Target]:
    """Each function's target; an unknown ``option`` is reported at the module."""
    out = {}
    for func in walk(module):
        if func.name != FUNC:
            continue
        try:
            out[_name(func)] = function_target(func, option)
        except TargetError as e:
            raise Failure(e.message, module.location if option else func.location) from e
    return out
