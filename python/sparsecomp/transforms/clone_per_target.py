"""Pass ``sparse-iter-clone-per-target``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import TargetError
from sparsecomp.ir.targets import TARGET_ATTR, module_targets
from sparsecomp.targets.resolve import select_target
from sparsecomp.transforms.base import SparsecompPass

FUNC, CALL = "func.func", "func.call"


def _name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def _target(func: ir.Operation) -> str | None:
    attrs = func.attributes
    return ir.StringAttr(attrs[TARGET_ATTR]).value if TARGET_ATTR in attrs else None


def _is_private(func: ir.Operation) -> bool:
    attrs = func.attributes
    return "sym_visibility" in attrs and ir.StringAttr(attrs["sym_visibility"]).value == "private"


def _calls(func: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == CALL:
            found.append(op)
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return found


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_1``, ``name_2``, ... where the module has it already."""
    found, n = name, 0
    while found in taken:
        n += 1
        found = f"{name}_{n}"
    return found


def _callee(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


@dataclasses.dataclass(frozen=True)
class ClonePerTargetPass(SparsecompPass):
    """Give every private function the target of its callers, cloning it per target.

    In a module with several ``sparse_iter.targets``, a private function
    without ``sparse_iter.target`` takes the target of the functions that
    call it, as IREE duplicates an executable for each device that reaches
    it. Called from one target, it gets that target; called from several,
    one copy per distinct target description (targets with equal
    descriptions share a copy), named ``<function>__<target>``, and each call
    goes to the copy of its caller's target. Copies inherit the original's
    callees, so the whole call tree below a shared helper is specialized.
    Private functions no function calls are left alone; public functions
    without a target stay an error of ``sparse-iter-specialize-encodings``.

    Does nothing in a module with at most one target, or when the option
    ``target`` names one target for every function (``host`` or one of the
    module's; another name is an error).

    Before (two targets ``wide`` and ``narrow``):

    ```mlir
    func.func private @helper(...) { ... }
    func.func @on_wide(...) attributes {sparse_iter.target = "wide"} {
      %0 = call @helper(...)
    }
    func.func @on_narrow(...) attributes {sparse_iter.target = "narrow"} {
      %0 = call @helper(...)
    }
    ```

    After:

    ```mlir
    func.func private @helper__wide(...) attributes {sparse_iter.target = "wide"} { ... }
    func.func private @helper__narrow(...) attributes {sparse_iter.target = "narrow"} { ... }
    func.func @on_wide(...) attributes {sparse_iter.target = "wide"} {
      %0 = call @helper__wide(...)
    }
    func.func @on_narrow(...) attributes {sparse_iter.target = "narrow"} {
      %0 = call @helper__narrow(...)
    }
    ```
    """

    NAME = "sparse-iter-clone-per-target"
    target: str = ""

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        targets = module_targets(op)
        if self.target:  # one target for every function: nothing to clone, if it exists
            try:
                select_target(self.target, None, targets)
            except TargetError as exc:
                op.location.emit_error(f"{self.NAME}: {exc.message}")
                pass_.signal_pass_failure()
            return
        if len(targets) <= 1:
            return
        # One representative name per distinct target description.
        canonical: dict[str, str] = {}
        for name in sorted(targets):
            canonical[name] = next(n for n in sorted(targets) if targets[n] == targets[name])
        body = op.regions[0].blocks[0]
        while self._assign_one(body, canonical) or self._break_cycle(body, pass_):
            pass

    @staticmethod
    def _call_graph(
        body: ir.Block,
    ) -> tuple[dict[str, ir.Operation], dict[str, list[tuple[ir.Operation, str]]]]:
        """Functions by name, and for each the calls to it with their calling function."""
        ops = [o.operation for o in body.operations]
        funcs = {_name(f): f for f in ops if f.name == FUNC}
        callers: dict[str, list[tuple[ir.Operation, str]]] = {n: [] for n in funcs}
        for name, func in funcs.items():
            for call in _calls(func):
                callee = _callee(call)
                if callee in callers and callee != name:
                    callers[callee].append((call, name))
        return funcs, callers

    def _break_cycle(self, body: ir.Block, pass_: ExternalPass) -> bool:
        """Private functions that wait on each other (a call cycle) and are reached from one
        target take it; from several, a located error. False when nothing waits."""
        funcs, callers = self._call_graph(body)
        waiting = [
            n for n, f in funcs.items() if _target(f) is None and _is_private(f) and callers[n]
        ]
        for name in waiting:
            origins, seen, stack = set(), {name}, [name]
            while stack:
                for _, caller in callers[stack.pop()]:
                    if (t := _target(funcs[caller])) is not None:
                        origins.add(t)
                    elif caller not in seen:
                        seen.add(caller)
                        stack.append(caller)
            if len(origins) == 1:
                funcs[name].attributes[TARGET_ATTR] = ir.StringAttr.get(origins.pop())
                return True
            if len(origins) > 1:
                funcs[name].location.emit_error(
                    f"'{name}' is in a call cycle reached from targets "
                    f"{', '.join(sorted(origins))}; {self.NAME} copies acyclic calls only: "
                    "give the functions of the cycle a sparse_iter.target"
                )
                pass_.signal_pass_failure()
                return False
        return False

    def _assign_one(self, body: ir.Block, canonical: dict[str, str]) -> bool:
        """Give one untargeted private function its callers' targets; False when none is ready."""
        funcs, named_callers = self._call_graph(body)
        callers = {
            n: [(call, _target(funcs[c])) for call, c in sites]
            for n, sites in named_callers.items()
        }
        for name, func in funcs.items():
            sites = callers[name]
            if _target(func) is not None or not _is_private(func) or not sites:
                continue
            if any(t is None for _, t in sites):
                continue  # wait until every caller has a target
            groups: dict[str, list[ir.Operation]] = {}
            for call, t in sites:
                groups.setdefault(canonical.get(t or "", t or ""), []).append(call)
            if len(groups) == 1:
                (only,) = groups
                func.attributes[TARGET_ATTR] = ir.StringAttr.get(only)
                return True
            taken = set(funcs)
            for target, calls in groups.items():
                copy_name = _unique(f"{name}__{target}", taken)
                taken.add(copy_name)
                copy = func.clone(ip=ir.InsertionPoint(func))
                copy.attributes["sym_name"] = ir.StringAttr.get(copy_name)
                copy.attributes[TARGET_ATTR] = ir.StringAttr.get(target)
                for call in [*calls, *(c for c in _calls(copy) if _callee(c) == name)]:
                    call.attributes["callee"] = ir.FlatSymbolRefAttr.get(copy_name)
            func.erase()
            return True
        return False
