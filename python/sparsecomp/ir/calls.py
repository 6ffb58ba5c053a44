"""The functions of a module and the call edges between them.

Passes that send some functions down another road (the upstream sparsifier)
must send their callers and callees too, so that calls keep agreeing types:
:func:`close_over_calls` spreads a per-function reason along call edges.
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.ir.walk import preorder


def functions(module: ir.Operation) -> list[ir.Operation]:
    """The ``func.func`` ops directly in ``module``, in order."""
    ops = [op.operation for op in module.regions[0].blocks[0].operations]
    return [op for op in ops if op.name == "func.func"]


def name_of(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def callees(func: ir.Operation) -> set[str]:
    """Names of the functions ``func`` calls with ``func.call``."""
    return {
        ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        for op in preorder(func)
        if op.name == "func.call"
    }


def reachable(edges: dict[str, set[str]], name: str) -> set[str]:
    """The functions ``name`` calls, directly or not, by ``edges`` (name -> the names
    it calls, :func:`callees`); ``name`` itself left out."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        for callee in edges.get(stack.pop(), set()):
            if callee not in seen and callee != name and callee in edges:
                seen.add(callee)
                stack.append(callee)
    return seen


def close_over_calls(funcs: list[ir.Operation], reasons: dict[str, str]) -> dict[str, str]:
    """``reasons`` (function name -> why) spread to every caller and callee.

    A function reached through a call gets the reason ``calls or is called
    by 'f', which <f's reason>``.
    """
    names = {name_of(f): f for f in funcs}
    kept = dict(reasons)
    edges = {n: callees(f) & names.keys() for n, f in names.items()}
    changed = True
    while changed:
        changed = False
        for caller, called in edges.items():
            for callee in called:
                for a, b in ((caller, callee), (callee, caller)):
                    if a in kept and b not in kept:
                        kept[b] = f"calls or is called by '{a}', which {kept[a]}"
                        changed = True
    return kept
