"""Pass ``sparse-iter-safe-division``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Integer divisions and remainders; the signed ones also trap on ``MIN / -1``.
SIGNED = ("arith.divsi", "arith.remsi")
UNSIGNED = ("arith.divui", "arith.remui")


def _element(ty: ir.Type) -> ir.Type:
    return ir.VectorType(ty).element_type if isinstance(ty, ir.VectorType) else ty


def _width(ty: ir.Type) -> int:
    """The bit width of an integer (or vector of integer) type; 64 for ``index``."""
    element = _element(ty)
    return 64 if isinstance(element, ir.IndexType) else ir.IntegerType(element).width


def _constant(ty: ir.Type, value: int) -> ir.Value:
    """``value`` as a constant of integer, ``index`` or vector type ``ty``."""
    attr = ir.IntegerAttr.get(_element(ty), value)
    if isinstance(ty, ir.VectorType):
        return arith.constant(ty, ir.DenseElementsAttr.get_splat(ty, attr))
    return arith.constant(ty, attr)


def _known(value: ir.Value) -> set[int] | None:
    """The values a constant (or splat constant) divisor holds; None if not constant."""
    if not isinstance(value, ir.OpResult) or value.owner.name != "arith.constant":
        return None
    attr = value.owner.attributes["value"]
    if isinstance(attr, ir.IntegerAttr):
        return {attr.value}
    if isinstance(attr, ir.DenseIntElementsAttr):
        return {int(v) for v in attr}
    return None


def _harmless(op: ir.Operation) -> bool:
    """Whether ``op`` cannot trap: its divisor is a constant without 0 (and, signed,
    without -1): the block sizes and affine maps' divisions of our own lowering."""
    values = _known(op.operands[1])
    if values is None:
        return False
    return 0 not in values and (op.name not in SIGNED or -1 not in values)


def guard(op: ir.Operation) -> None:
    """Replace integer division or remainder ``op`` by one that cannot trap."""
    a, b = op.operands[0], op.operands[1]
    ty = b.type
    with ir.InsertionPoint(op), op.location:
        zero, one = _constant(ty, 0), _constant(ty, 1)
        by_zero = arith.cmpi(arith.CmpIPredicate.eq, b, zero)
        safe = arith.select(by_zero, one, b)
        if op.name in SIGNED:  # MIN / -1 overflows: divide by 1 (MIN, and remainder 0)
            width = _width(ty)
            # wider than 64 bits, 1 << (width - 1) is built in the IR: the bindings' integer
            # attributes hold 64 (an i128 division failed here with an internal error)
            minimum = (
                _constant(ty, -(1 << (width - 1)))
                if width <= 64
                else arith.shli(one, _constant(ty, width - 1))
            )
            overflow = arith.andi(
                arith.cmpi(arith.CmpIPredicate.eq, b, _constant(ty, -1)),
                arith.cmpi(arith.CmpIPredicate.eq, a, minimum),
            )
            safe = arith.select(overflow, one, safe)
        quotient = ir.Operation.create(op.name, results=[ty], operands=[a, safe]).result
        result = arith.select(by_zero, zero, quotient)
    op.results[0].replace_all_uses_with(result)
    op.erase()


@dataclasses.dataclass(frozen=True)
class SafeDivisionPass(SparsecompPass):
    """Integer division and remainder that cannot kill the process.

    ``arith.divsi``, ``divui``, ``remsi`` and ``remui`` by zero (and signed
    ``MIN / -1``) are undefined in MLIR, and on x86 LLVM's ``sdiv``/``udiv``
    become ``idiv``/``div``, which trap: the calling Python process died of
    SIGFPE, with no exception. A user need not write a zero for it: an
    integer ``A / B`` over sparse operands divides ``A``'s stored entries by
    ``B``'s implicit zeros. This pass divides by 1 where the divisor is 0 and
    gives 0 there, as numpy's integer ``//`` and ``%`` do, and divides
    ``MIN / -1`` by 1 (``MIN``, remainder 0: numpy's wrapped results).
    Divisions by a constant without 0 (or -1, signed) stay as they are: the
    address arithmetic of our lowering (block sizes, affine maps) costs
    nothing more. Scalars, ``index`` and vectors alike.

    Runs in ``sparsecomp-cpu-codegen`` (CPU kernels, and GPU kernels emulated on
    the CPU) after ``arith-expand`` (which turns
    ``floordivsi`` and ``ceildivsi`` into these ops), before
    ``convert-arith-to-llvm``.

    Before:

    ```mlir
    %q = arith.divsi %a, %b : i32
    ```

    After:

    ```mlir
    %z = arith.cmpi eq, %b, %c0 : i32
    %d = arith.select %z, %c1, %b : i32            // and 1 where %a = MIN, %b = -1
    %q0 = arith.divsi %a, %d : i32
    %q = arith.select %z, %c0, %q0 : i32
    ```
    """

    NAME = "sparse-iter-safe-division"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        found = [
            inner
            for inner in preorder(op)
            if inner.name in SIGNED + UNSIGNED and not _harmless(inner)
        ]
        for division in found:
            guard(division)
