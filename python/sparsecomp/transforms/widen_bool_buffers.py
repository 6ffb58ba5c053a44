"""Pass ``sparse-iter-widen-bool-buffers``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, memref
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Ops that only pass a buffer along or allocate it: retyping their values is enough.
_CARRIERS = {
    "memref.alloc", "memref.alloca", "memref.realloc", "memref.dealloc", "memref.dim",
    "memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.copy",
    "scf.for", "scf.if", "scf.while", "scf.yield", "scf.condition", "scf.execute_region",
    "func.func", "func.call", "func.return",
}  # fmt: skip
#: Ops that read or write elements: they get an extui/trunci.
_ACCESSES = {"memref.load", "memref.store", "linalg.fill"}


def _is_bool_buffer(ty: ir.Type) -> bool:
    return isinstance(ty, ir.MemRefType) and str(ir.MemRefType(ty).element_type) == "i1"


def _widened(ty: ir.Type) -> ir.Type:
    mt = ir.MemRefType(ty)
    i8 = ir.IntegerType.get_signless(8, ty.context)
    loc = ir.Location.unknown(ty.context)
    return ir.MemRefType.get(mt.shape, i8, mt.layout, mt.memory_space, loc=loc)


def _values(op: ir.Operation) -> list[ir.Value]:
    values: list[ir.Value] = list(op.results)
    for region in op.regions:
        for block in region.blocks:
            values += list(block.arguments)
    return values


def _retype_function(op: ir.Operation) -> None:
    fty = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    widen = [_widened(t) if _is_bool_buffer(t) else t for t in fty.inputs]
    results = [_widened(t) if _is_bool_buffer(t) else t for t in fty.results]
    op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(widen, results))


def _fix_access(op: ir.Operation) -> None:
    i1 = ir.IntegerType.get_signless(1, op.context)
    i8 = ir.IntegerType.get_signless(8, op.context)
    with ir.InsertionPoint(op), op.location:
        if op.name == "memref.load":
            loaded = memref.LoadOp(op.operands[0], list(op.operands[1:])).result
            op.results[0].replace_all_uses_with(arith.TruncIOp(i1, loaded).result)
            op.erase()
        else:  # memref.store %v, %m[...] / linalg.fill ins(%v) outs(%m)
            op.operands[0] = arith.ExtUIOp(i8, op.operands[0]).result
            for region in op.regions:
                for arg in region.blocks[0].arguments:
                    arg.set_type(i8)


@dataclasses.dataclass(frozen=True)
class WidenBoolBuffersPass(SparsecompPass):
    """Store i1 buffers as i8 (memref<?xi1> -> memref<?xi8>).

    The MLIR build sparsecomp pins asserts when ``finalize-memref-to-llvm``
    lowers a ``memref.store`` to an ``i1`` buffer, which the upstream
    sparsifier creates for the "filled" flags of its expanded access
    pattern (SpGEMM, sparse-output SDDMM). LLVM stores ``i1`` in a byte
    anyway, so the layout in memory does not change: every memref value
    and function signature with element type ``i1`` gets ``i8``, loads are
    followed by ``arith.trunci`` and stored / filled values go through
    ``arith.extui``.

    It runs on buffers (after bufferization). If any ``i1`` buffer has a
    user other than allocation, load/store, ``linalg.fill``, views, copies,
    ``scf``/``func`` control flow (e.g. a vector transfer), the module is
    left unchanged.

    Before:

    ```mlir
    %filled = memref.alloc(%n) : memref<?xi1>
    memref.store %true, %filled[%i] : memref<?xi1>
    %f = memref.load %filled[%j] : memref<?xi1>
    ```

    After:

    ```mlir
    %filled = memref.alloc(%n) : memref<?xi8>
    %t = arith.extui %true : i1 to i8
    memref.store %t, %filled[%i] : memref<?xi8>
    %b = memref.load %filled[%j] : memref<?xi8>
    %f = arith.trunci %b : i8 to i1
    ```
    """

    NAME = "sparse-iter-widen-bool-buffers"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        ops = preorder(op)
        values = [v for o in ops for v in _values(o) if _is_bool_buffer(v.type)]
        users = {use.owner.name for v in values for use in v.uses}
        if not values or not users <= _CARRIERS | _ACCESSES:
            return
        accesses = [
            o for o in ops
            if o.name in _ACCESSES and any(_is_bool_buffer(v.type) for v in o.operands)
        ]  # fmt: skip
        for o in ops:
            if o.name == "func.func":
                _retype_function(o)
        for v in values:
            v.set_type(_widened(v.type))
        for o in accesses:
            _fix_access(o)
