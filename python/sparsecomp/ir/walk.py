"""Collecting ops in pre-order, so passes can rewrite them after the walk."""

from __future__ import annotations

from mlir import ir


def preorder(root: ir.Operation) -> list[ir.Operation]:
    """``root`` and every op nested in it, parents before children.

    The list is taken before any change, so callers may erase or replace ops
    while iterating it (the walk itself must not see a changing IR).
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
