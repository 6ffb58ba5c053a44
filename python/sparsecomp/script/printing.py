"""What both printers share (:mod:`.printer`, :mod:`.loops_printer`): the error, the
names the printed Python reserves, and text helpers."""

from __future__ import annotations

import re
from typing import Any

from sparsecomp.errors import SparsecompError
from sparsecomp.script.types import SCALARS

#: names the printed Python gives a meaning to: no kernel takes them
BUILTINS = {
    "max", "min", "abs", "where", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos",
    *SCALARS, "assemble", "kernel", "loops", "op", "Tensor", "MODULE", "sparsity", "range",
    "dim", "index", "uindex",
}  # fmt: skip


class Unprintable(SparsecompError):
    """The IR is not what a subset of the Python front end can say (the op and why)."""


def fail(op: Any, why: str) -> Unprintable:
    """:class:`Unprintable` for ``op``, located where ``op`` is."""
    op = op.operation
    found = re.search(r'loc\("([^"]*)":(\d+):(\d+)\)', str(op.location))
    where = ":".join(found.groups()) if found else None
    return Unprintable(f"'{op.name}' cannot be printed as Python: {why}", location=where)


def bare(expr: str) -> str:
    """``expr`` without the parentheses around all of it."""
    if not (expr.startswith("(") and expr.endswith(")")):
        return expr
    depth = 0
    for k, c in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and k < len(expr) - 1:
            return expr
    return expr[1:-1]


def quote(text: str) -> str:
    """``text`` as a Python string literal in double quotes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
