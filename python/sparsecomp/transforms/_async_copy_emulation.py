"""``cp.async`` in the emulation: each copy done when issued, its groups' waits nothing.

Used by ``sparse-iter-emulate-gpu`` before a launch is emulated. An
``nvgpu.device_async_copy`` of ``n`` elements (``srcElements`` of them read,
the rest zeros) from global into workgroup memory becomes a masked vector
load of the first ``srcElements`` elements and a store of all ``n``;
``nvvm.cp.async.commit.group`` and ``nvvm.cp.async.wait.group`` are dropped.
On the GPU a copy lands at some point before the wait that covers its
group, and a kernel that reads the buffer only after that wait and a
barrier (as it must) reads what the synchronous copy wrote; the emulation
then runs no copy too late, though it cannot find a missing wait. The
copy's token, where used (``nvgpu.device_async_create_group`` and
``nvgpu.device_async_wait``), is refused: the kernels use the NVVM ops.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, vector

from sparsecomp.transforms._lockstep import Refusal

_DROPPED = ("nvvm.cp.async.commit.group", "nvvm.cp.async.wait.group")


def lower_async_copies(launch: ir.Operation) -> None:
    """Rewrite the launch's asynchronous copies as synchronous ones (see the module)."""
    copies: list[ir.Operation] = []
    dropped: list[ir.Operation] = []
    refused: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "nvgpu.device_async_copy":
            copies.append(op)
        elif op.name in _DROPPED:
            dropped.append(op)
        elif op.name.startswith("nvgpu.device_async"):
            refused.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    launch.walk(visit)
    if refused:
        name = refused[0].name
        raise Refusal(refused[0], f"'{name}' is not emulated (use the nvvm.cp.async group ops)")
    for op in copies:
        _synchronous(op)
    for op in dropped:
        op.erase()


def _synchronous(op: ir.Operation) -> None:
    if len(list(op.results[0].uses)):
        raise Refusal(op, "an asynchronous copy whose token is used is not emulated")
    # Operands: dst, its indices, src, its indices, then srcElements if given.
    operands = list(op.operands)
    target = operands[0]
    target_ty = ir.MemRefType(target.type)
    target_at = operands[1 : 1 + target_ty.rank]
    source = operands[1 + target_ty.rank]
    source_ty = ir.MemRefType(source.type)
    source_at = operands[2 + target_ty.rank : 2 + target_ty.rank + source_ty.rank]
    rest = operands[2 + target_ty.rank + source_ty.rank :]
    count = ir.IntegerAttr(op.attributes["dstElements"]).value
    element = source_ty.element_type
    with ir.InsertionPoint(op), op.location:
        ty = ir.VectorType.get([count], element)
        index = ir.IndexType.get()
        read = rest[0] if rest else arith.constant(index, count)
        mask = vector.create_mask(ir.VectorType.get([count], ir.IntegerType.get_signless(1)),
                                  [read])  # fmt: skip
        zero = arith.constant(ty, ir.DenseElementsAttr.get_splat(ty, _zero(element)))
        loaded = vector.maskedload(ty, source, source_at, mask, zero)
        vector.store(loaded, target, target_at)
    op.erase()


def _zero(element: ir.Type) -> ir.Attribute:
    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, 0)
    return ir.FloatAttr.get(element, 0.0)
