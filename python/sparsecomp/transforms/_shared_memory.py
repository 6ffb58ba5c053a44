"""Workgroup (shared) memory in the emulation: one buffer per block.

Used by ``sparse-iter-emulate-gpu``. A launch's workgroup attributions
(``workgroup(%w : memref<..., #gpu.address_space<workgroup>>)``) and the
workgroup ``memref.alloc`` ops at the top of its body become plain host
buffers allocated once per block, before its threads run, and freed after
them: every thread of a block sees the same buffer, and no block sees
another's, as on the GPU. Loads and stores take the plain buffer as they
are; other uses of a workgroup buffer (views, casts) are refused, since
their result types name the memory space.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from sparsecomp.transforms._lockstep import Refusal

_USERS = ("memref.load", "memref.store", "memref.atomic_rmw", "vector.load", "vector.store",
          "memref.extract_aligned_pointer_as_index")  # fmt: skip


def is_workgroup(ty: ir.MemRefType) -> bool:
    space = ty.memory_space
    return space is not None and "workgroup" in str(space)


def attributions(launch: ir.Operation) -> int:
    """How many workgroup attributions the launch has."""
    if "workgroup_attributions" not in launch.attributes:
        return 0
    return int(ir.IntegerAttr(launch.attributes["workgroup_attributions"]).value)


def buffers(launch: ir.Operation) -> list[ir.Value]:
    """The launch's workgroup buffers: its attributions, then its body's workgroup allocs."""
    body = launch.regions[0].blocks[0]
    found = list(body.arguments)[12 : 12 + attributions(launch)]
    for op in body.operations:
        op = op.operation
        if op.name == "memref.alloc" and is_workgroup(ir.MemRefType(op.results[0].type)):
            found.append(op.results[0])
    return found


def check(launch: ir.Operation) -> None:
    """Refuse workgroup memory the emulation cannot give each block (see the module)."""
    allowed = set()
    for value in buffers(launch):
        allowed.add(value)
        ty = ir.MemRefType(value.type)
        if not ty.has_static_shape:
            raise Refusal(launch, f"workgroup memory of dynamic shape ({ty}) is not emulated")
        for use in value.uses:
            user = use.owner.operation
            if user.name not in _USERS and not user.name.startswith("func.call"):
                raise Refusal(user, f"'{user.name}' on workgroup memory is not emulated")

    nested: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.alloc" and is_workgroup(ir.MemRefType(op.results[0].type)):
            if op.results[0] not in allowed:
                nested.append(op)
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    launch.walk(visit)
    if nested:
        raise Refusal(nested[0], "workgroup memory allocated inside a loop or branch")


def per_block(launch: ir.Operation, start: ir.InsertionPoint, end: ir.InsertionPoint) -> None:
    """Allocate each workgroup buffer at ``start`` (a block's first op), free it at ``end``."""
    for value in buffers(launch):
        ty = ir.MemRefType(value.type)
        with launch.location:
            plain = ir.MemRefType.get(ty.shape, ty.element_type)
        with start, launch.location:
            fresh = memref.AllocOp(plain, [], [])
        with end, launch.location:
            memref.DeallocOp(fresh.results[0])
        value.replace_all_uses_with(fresh.results[0])
        owner = getattr(value.owner, "operation", value.owner)
        if isinstance(owner, ir.Operation):
            owner.erase()
