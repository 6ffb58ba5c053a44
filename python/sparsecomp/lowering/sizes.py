"""Which argument sizes a kernel assumes equal (checked by the runtime before a call).

Lowering a ``linalg.generic`` to loops drops the op's implicit promise that
every operand dimension indexed by the same loop has the same size; a call
with mismatched shapes would then read out of bounds. Before the op goes,
``record`` notes each such pair of *function argument* dimensions in the
function's ``sparse_iter.same_sizes`` attribute (``[arg, dim, arg, dim]``
entries); ``sparse-iter-lower-buffers`` turns the classes into the size
symbols of ``sparse_iter.abi``.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from sparsecomp.lowering.plan import Plan
from sparsecomp.lowering.rowplan import RowPlan

ATTR = "sparse_iter.same_sizes"


def _function(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    return parent


def _arg_number(value: ir.Value, entry: ir.Block) -> int | None:
    if not isinstance(value, ir.BlockArgument):
        return None
    arg = ir.BlockArgument(value)
    return arg.arg_number if arg.owner == entry else None


def record(plan: Plan | RowPlan) -> None:
    """Add the plan's equal-size argument dimensions to its function's attribute."""
    func = _function(plan.op)
    if func is None:
        return
    entry = func.regions[0].blocks[0]
    by_loop: dict[int, list[tuple[int, int]]] = {}
    for acc in [*plan.inputs, plan.output]:
        number = _arg_number(acc.value, entry)
        if number is None:
            continue
        for pos, dim in enumerate(acc.dims):
            if dim is not None:
                by_loop.setdefault(dim, []).append((number, pos))
    pairs = [
        ir.DenseI64ArrayAttr.get([*members[0], *other])
        for members in by_loop.values()
        for other in members[1:]
    ]
    if not pairs:
        return
    old = list(func.attributes[ATTR]) if ATTR in func.attributes else []
    func.attributes[ATTR] = ir.ArrayAttr.get(old + pairs)


def size_symbols(func: ir.Operation, n_args: int) -> dict[tuple[int, int], str]:
    """``(arg, dim) -> symbol`` for argument dimensions that must be equal."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    entries: list[Any] = list(func.attributes[ATTR]) if ATTR in func.attributes else []
    for entry in entries:
        a, da, b, db = list(ir.DenseI64ArrayAttr(entry))
        ra, rb = find((a, da)), find((b, db))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    classes: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for key in {k for e in entries for k in _keys(e)}:
        classes.setdefault(find(key), []).append(key)
    symbols = {}
    for n, root in enumerate(sorted(classes)):
        for key in classes[root]:
            symbols[key] = f"s{n}"
    return symbols


def _keys(entry: Any) -> list[tuple[int, int]]:
    a, da, b, db = list(ir.DenseI64ArrayAttr(entry))
    return [(a, da), (b, db)]
