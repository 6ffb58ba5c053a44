"""The target a function compiles for, read from the module's target attributes."""

from __future__ import annotations

from mlir import ir

from sparsecomp.ir.verify import TARGET_ATTR, TARGETS_ATTR
from sparsecomp.targets import Target, target_from_attr
from sparsecomp.targets.resolve import select_target


def module_targets(op: ir.Operation) -> dict[str, Target]:
    """``sparse_iter.targets`` of the closest enclosing op that has it (``{}`` if none)."""
    at: ir.Operation | None = op
    while at is not None:
        if TARGETS_ATTR in at.attributes:
            targets = ir.DictAttr(at.attributes[TARGETS_ATTR])
            return {
                targets[i].name: target_from_attr(str(targets[i].attr)) for i in range(len(targets))
            }
        at = at.parent
    return {}


def function_target(func: ir.Operation, option: str = "") -> Target:
    """The target of ``func`` (see :func:`sparsecomp.targets.resolve.select_target`)."""
    named = func.attributes[TARGET_ATTR] if TARGET_ATTR in func.attributes else None
    name = ir.StringAttr(named).value if named is not None else None
    return select_target(option, name, module_targets(func))


def enclosing_function(op: ir.Operation) -> ir.Operation | None:
    at = op.parent
    while at is not None and at.name != "func.func":
        at = at.parent
    return at
