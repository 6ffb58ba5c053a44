"""A program's variant with one sparse argument in another layout (``Executable.prepare``).

The variant is the same module with a decomposition rule on the argument
(``sparse_iter.decompose``, applied by ``sparse-iter-decompose-formats`` in
the first stage): the argument, and every value of the function with its
type (an output that shares its encoding, as SDDMM's does), take the
layout. The compile cache then keeps it like any program.
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import parse_module
from sparsecomp.transforms.decompose_formats import DECOMPOSE


def with_layout(text: str, function: str, argument: int, attr: str) -> str:
    """``text`` with the rule ``attr`` (a ``#sparse_iter.layout<...>`` or
    ``#sparse_iter.composable<...>``) on ``function``'s ``argument``-th argument."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = parse_module(text, "<variant>", ctx)
        funcs = [
            o.operation
            for o in module.body.operations
            if o.operation.name == "func.func"
            and ir.StringAttr(o.operation.attributes["sym_name"]).value == function
        ]
        if not funcs:
            raise SparsecompError(f"no function '{function}' in the program")
        func = funcs[0]
        count = len(func.regions[0].blocks[0].arguments)
        if "arg_attrs" in func.attributes:
            arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"]))
        else:
            arg_attrs = [ir.DictAttr.get({}) for _ in range(count)]
        entries = {n.name: n.attr for n in ir.DictAttr(arg_attrs[argument])}
        entries[DECOMPOSE] = ir.Attribute.parse(attr)
        arg_attrs[argument] = ir.DictAttr.get(entries)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
        return module.operation.get_asm(enable_debug_info=True)
