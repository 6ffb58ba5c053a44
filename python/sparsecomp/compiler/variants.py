"""A program's variant with sparse arguments in other layouts.

``Executable.prepare`` asks for one (a layout chosen for a matrix), and so
does a call whose operands have other index widths than the kernel's
(:mod:`sparsecomp.runtime.specialize`). The variant is the same module with
a decomposition rule on each such argument
(``sparse_iter.decompose``, applied by ``sparse-iter-decompose-formats`` in
the first stage): the argument, and every value of the function with its
type (an output that shares its encoding, as SDDMM's does), take the
layout. The compile cache then keeps it like any program.
"""

from __future__ import annotations

from collections.abc import Mapping

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import parse_module
from sparsecomp.transforms.decompose_formats import DECOMPOSE


def with_layouts(text: str, function: str, rules: Mapping[int, str]) -> str:
    """``text`` with each rule of ``rules`` (argument position -> a
    ``#sparse_iter.layout<...>`` or ``#sparse_iter.composable<...>``) on that
    argument of ``function``."""
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
        for argument, attr in rules.items():
            entries = {n.name: n.attr for n in ir.DictAttr(arg_attrs[argument])}
            entries[DECOMPOSE] = ir.Attribute.parse(attr)
            arg_attrs[argument] = ir.DictAttr.get(entries)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
        return module.operation.get_asm(enable_debug_info=True)
