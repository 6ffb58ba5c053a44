"""What a ``linalg.generic`` body yields when the sparse operand is zero.

Iterating only over the stored entries of a sparse operand ``a`` is exact
when, at ``a = 0``, the body yields either the output's current value
(*annihilating*: ``out + a * x``; positions that are not stored keep the
initial value) or zero (*zero-producing*: ``a * x``; the output is first
filled with zeros). :func:`classify` decides this by evaluating the body
symbolically with ``a`` replaced by zero, the same algebra MLIR's sparsifier
uses (``0 * x = 0``, ``0 + x = x``, ``0 / x = 0``, ``max(0, 0) = 0``, casts
keep zero). Like it, and like scipy, it treats ``0 * inf`` and ``0 * nan``
as zero. A floating-point division *by* the sparse operand is not: ``x / 0``
is inf and ``0 / 0`` NaN, as numpy and scipy's ``A / B`` give (such a body
visits every position); integer division by zero gives 0
(``sparse-iter-safe-division``).

A zero-producing body may still read the output (``out * a``: the output
is zero where ``a`` is not stored and ``out * a`` where it is): the
lowerings fill the output with zeros first but read ``out`` from the
output's value before the fill (:func:`reads_output`). Such a body is only
exact when each output element is visited once, so a zero-producing body
may not reduce over a dimension of the sparse operand (a skipped entry
would have reset the element).
"""

from __future__ import annotations

from enum import Enum

from mlir import ir


class Zero(Enum):
    """The symbolic value of an SSA value when the sparse operand is zero."""

    ZERO = "zero"  # exactly zero
    OUT = "out"  # the output block argument, unchanged
    OTHER = "other"  # anything else


_MULTIPLY = {"arith.mulf", "arith.muli"}
_ADD = {"arith.addf", "arith.addi"}
_SUB = {"arith.subf", "arith.subi"}
_DIVIDE = {
    "arith.divf", "arith.divsi", "arith.divui", "arith.ceildivsi", "arith.ceildivui",
    "arith.floordivsi", "arith.remf", "arith.remsi", "arith.remui",
}  # fmt: skip
#: x / 0 is not zero in floating point (integers: 0, sparse-iter-safe-division)
_FLOAT_DIVIDE = {"arith.divf", "arith.remf"}
_AND = {"arith.andi"}
_OR = {"arith.ori", "arith.xori"}
#: f(x, x) = x: the result keeps a class its operands share (max(0, 0) = 0).
_IDEMPOTENT = {
    "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "arith.maxsi",
    "arith.minsi", "arith.maxui", "arith.minui",
}  # fmt: skip
_KEEP_ZERO = {
    "arith.negf", "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp",
    "arith.fptosi", "arith.fptoui", "arith.extsi", "arith.extui", "arith.trunci",
    "arith.bitcast", "math.absf", "math.absi", "math.sqrt", "math.sin", "math.tanh",
}  # fmt: skip


def _constant_class(op: ir.Operation) -> Zero:
    value = op.attributes["value"]
    if isinstance(value, ir.FloatAttr):
        return Zero.ZERO if ir.FloatAttr(value).value == 0.0 else Zero.OTHER
    if isinstance(value, ir.IntegerAttr):
        return Zero.ZERO if ir.IntegerAttr(value).value == 0 else Zero.OTHER
    return Zero.OTHER


def _op_class(op: ir.Operation, args: list[Zero]) -> Zero:
    name = op.name
    if name == "arith.constant":
        return _constant_class(op)
    if name in _MULTIPLY or name in _AND:
        return Zero.ZERO if Zero.ZERO in args else Zero.OTHER
    if name in _IDEMPOTENT:
        return args[0] if args[0] == args[1] else Zero.OTHER
    if name in _ADD or name in _OR:
        if args[0] == Zero.ZERO:
            return args[1]
        return args[0] if args[1] == Zero.ZERO else Zero.OTHER
    if name in _SUB:
        return args[0] if args[1] == Zero.ZERO else Zero.OTHER
    if name in _DIVIDE:
        if name in _FLOAT_DIVIDE and args[1] == Zero.ZERO:
            return Zero.OTHER  # x / 0 is inf, 0 / 0 NaN (numpy's and scipy's A / B)
        return Zero.ZERO if args[0] == Zero.ZERO else Zero.OTHER
    if name in _KEEP_ZERO:
        return Zero.ZERO if args[0] == Zero.ZERO else Zero.OTHER
    if name == "arith.select" and args[1] == args[2] != Zero.OTHER:
        return args[1]
    return Zero.OTHER


def _defined_outside(value: ir.Value) -> Zero:
    """The class of a value the body takes from outside: a constant's own (the
    canonicalizer moves ``where(a > t, a, 0.0)``'s zero out of the body), any other
    value an arbitrary one."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return Zero.OTHER
    owner = owner.operation
    return _constant_class(owner) if owner.name == "arith.constant" else Zero.OTHER


def classify(block: ir.Block, sparse_args: list[int], out_arg: int) -> Zero:
    """The class of the yielded value when block arguments ``sparse_args`` are zero.

    ``out_arg`` is the block argument of the output; every other argument is
    an arbitrary value.
    """
    known: dict[ir.Value, Zero] = {}
    for i, arg in enumerate(block.arguments):
        known[arg] = Zero.ZERO if i in sparse_args else Zero.OUT if i == out_arg else Zero.OTHER
    for op in block.operations:
        if op.operation.name == "linalg.yield":
            return known.get(op.operands[0], Zero.OTHER)
        args = [known[v] if v in known else _defined_outside(v) for v in op.operands]
        cls = _op_class(op.operation, args)
        for r in op.results:
            known[r] = cls
    return Zero.OTHER


def reads_output(block: ir.Block, out_arg: int) -> bool:
    """Whether the body uses the output's block argument at all."""
    return bool(list(block.arguments[out_arg].uses))
