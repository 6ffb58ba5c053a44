"""Pass ``sparse-iter-decompose-formats``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import FormatError
from sparsecomp.ir.calls import callees, functions, name_of, reachable
from sparsecomp.ir.verify import check_tensor_type
from sparsecomp.ir.walk import retype_function
from sparsecomp.transforms.base import SparsecompPass

#: The argument attribute naming a decomposition rule.
DECOMPOSE = "sparse_iter.decompose"


class _Refused(Exception):
    def __init__(self, location: ir.Location, message: str) -> None:
        super().__init__(message)
        self.location, self.message = location, message


def rule_attr(value: ir.Attribute, location: ir.Location) -> ir.Attribute:
    """The layout attribute of a rule: a ``#sparse_iter.composable`` / ``#sparse_iter.layout``
    as it is, or a layout name (``"hyb:1:8"``, ``"bsr+csr:8x8"``) as its attribute."""
    if isinstance(value, ir.StringAttr):
        from sparsecomp.formats import parse_layout

        try:
            return ir.Attribute.parse(parse_layout(value.value).attr_text())
        except FormatError as exc:
            raise _Refused(location, f"'{DECOMPOSE}': {exc}") from None
    text = str(value)
    if not text.startswith(("#sparse_iter.composable<", "#sparse_iter.layout<")):
        raise _Refused(
            location,
            f"'{DECOMPOSE}' takes a #sparse_iter.composable or #sparse_iter.layout "
            f"attribute or a layout name, not {text}",
        )
    return value


def _replacing(old: ir.Type, new: ir.Type) -> Callable[[ir.Type], ir.Type]:
    return lambda ty: new if ty == old else ty


def _any_type_uses(arg: ir.Value) -> bool:
    """Whether every use of ``arg`` takes a tensor of any encoding, so that it alone
    can change its layout: a ``linalg`` op's input (not its init) or ``tensor.dim``."""
    for use in arg.uses:
        owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if owner.name == "tensor.dim" and use.operand_number == 0:
            continue
        if owner.name.startswith("linalg.") and "operandSegmentSizes" in owner.attributes:
            inputs = ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"])[0]
            if use.operand_number < inputs:
                continue
        return False
    return True


class _CallGraph:
    """Who calls whom among a module's functions (by name)."""

    def __init__(self, funcs: list[ir.Operation]) -> None:
        self.funcs = {name_of(f): f for f in funcs}
        self.callees = {n: callees(f) for n, f in self.funcs.items()}

    def callers(self, name: str) -> set[str]:
        return {caller for caller, called in self.callees.items() if name in called}

    def reach(self, name: str) -> set[str]:
        """The functions ``name`` calls, directly or not (itself left out)."""
        return reachable(self.callees, name)


@dataclasses.dataclass(frozen=True)
class DecomposeFormatsPass(SparsecompPass):
    """Apply decomposition rules: a function's sparse argument takes the rule's parts.

    A rule is the argument attribute ``sparse_iter.decompose``: a composable
    layout (``#sparse_iter.composable<...>``: its parts, each a layout with
    the rule that fills it, SparseTIR's DecomposeFormat generalised), a
    layout name (``"hyb:1:8"``, ``"bsr+csr:8x8"``) or a single layout. The
    pass gives the argument that layout, and with it every value of the
    function with the argument's type (an output sharing its encoding), and
    drops the attribute. Stage II then lowers the computation part by part:
    each part's loops accumulate into the same output (SpMM, SpMV: sums into
    one result), which is the combination a reduction needs; ops that
    overwrite their output are refused there. The caller packs the operand
    in the parts (``SparseTensor.from_scipy(A, "hyb:1:8")``, or any CSR
    input, converted at the call); ``Executable.prepare`` chooses the rule
    for a matrix and compiles the function with it.

    Runs first in ``sparsecomp-cpu-layouts``, after the import of upstream
    encodings. Arguments of one type (SpGEMM's two operands) that carry the
    same rule take it together, with every value of their type. An argument
    whose rule the others of its type do not share takes it alone where each
    of its uses takes a tensor of any encoding (a ``linalg`` op's input,
    ``tensor.dim``): SpGEMM called with one operand in 64-bit indices.
    The functions it calls (a private helper it passes the operand to) are
    retyped with it. Refused at the argument: a rule on a non-tensor or on an
    argument whose type others share without the same rule and that flows
    elsewhere (into an init, a call, a return), a rule that does not parse, a
    function that other functions call (their calls would not match), or
    whose callees other functions also call.

    ```mlir
    func.func @spmm(%A: tensor<?x?xf32, #sparse> {sparse_iter.decompose = "hyb:1:8"},
                    %B: tensor<?x?xf32>) -> tensor<?x?xf32>
    // becomes
    func.func @spmm(%A: tensor<?x?xf32, #sparse_iter.composable<[
                      #sparse_iter.part<ell_bucket[0, 1, 0, 1], #sparse_iter.layout<...>>, ...,
                      #sparse_iter.part<rest, #sparse_iter.layout<...>>]>>,
                    %B: tensor<?x?xf32>) -> tensor<?x?xf32>
    ```
    """

    NAME = "sparse-iter-decompose-formats"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = functions(op)
        graph = _CallGraph(funcs)
        try:
            for func in funcs:
                self._apply(func, graph)
        except _Refused as refused:
            refused.location.emit_error(f"{self.NAME}: {refused.message}")
            pass_.signal_pass_failure()

    @staticmethod
    def _apply(func: ir.Operation, graph: _CallGraph) -> None:
        if "arg_attrs" not in func.attributes:
            return
        arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
        rules = {
            i: ir.DictAttr(d)[DECOMPOSE]
            for i, d in enumerate(arg_attrs)
            if DECOMPOSE in ir.DictAttr(d)
        }
        if not rules:
            return
        name = name_of(func)
        if graph.callers(name) - {name}:
            raise _Refused(
                func.location,
                f"'{name}' is called by other functions; decompose its callers' operand instead",
            )
        reach = graph.reach(name)  # retyped with it: they take what it passes them
        for callee in sorted(reach):
            outside = graph.callers(callee) - reach - {name}
            if outside:
                raise _Refused(
                    func.location,
                    f"'{name}' passes its operands to '{callee}', which "
                    f"{', '.join(repr(o) for o in sorted(outside))} also "
                    f"{'calls' if len(outside) == 1 else 'call'}; decompose the operand of "
                    "a function whose callees no other function calls",
                )
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        body = func.regions[0].blocks[0]
        inputs = list(fty.inputs)
        done: set[int] = set()
        for index, rule in rules.items():
            if index in done:
                continue
            location = body.arguments[index].location
            old = inputs[index]
            if not isinstance(old, ir.RankedTensorType):
                raise _Refused(location, f"'{DECOMPOSE}' on an argument of type {old}")
            sharers = [i for i, t in enumerate(inputs) if t == old]
            alone = any(i not in rules or str(rules[i]) != str(rule) for i in sharers)
            if alone and not _any_type_uses(body.arguments[index]):
                raise _Refused(
                    location,
                    f"'{DECOMPOSE}' on an argument whose type {old} other arguments share "
                    "without the same rule; give it an encoding of its own",
                )
            with location:
                layout = rule_attr(rule, location)
                new = ir.RankedTensorType.get(old.shape, old.element_type, layout)
            problems = list(check_tensor_type(new))  # a rule of another rank: refused here
            if problems:
                what = problems[0].split(" but ")[0]  # "composable maps 2 dimensions"
                raise _Refused(
                    location,
                    f"'{DECOMPOSE}' = {rule} does not fit an argument of rank {old.rank}: "
                    f"its {what}",
                )
            if alone:  # this argument alone: its uses take a tensor of any encoding
                done.add(index)
                body.arguments[index].set_type(new)
                inputs[index] = new
                func.attributes["function_type"] = ir.TypeAttr.get(
                    ir.FunctionType.get(inputs, list(fty.results))
                )
                continue
            done.update(sharers)
            retype_function(func, _replacing(old, new))
            for callee in reach:
                retype_function(graph.funcs[callee], _replacing(old, new))
            inputs = [new if t == old else t for t in inputs]
            fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        kept = [{n.name: n.attr for n in ir.DictAttr(d) if n.name != DECOMPOSE} for d in arg_attrs]
        if any(kept):
            func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in kept])
        else:  # later stages change the arguments and would have to keep it in step
            del func.attributes["arg_attrs"]
