"""Pass ``sparse-iter-widen-bool-buffers``."""

from __future__ import annotations

import dataclasses

import numpy as np
from mlir import ir
from mlir.dialects import arith
from mlir.passmanager import ExternalPass

from sparsecomp.ir.elements import is_sparse_elements, sparse_elements, sparse_parts
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Ops that only pass a buffer along, allocate it or read its metadata:
#: retyping their values is enough.
_CARRIERS = {
    "memref.alloc", "memref.alloca", "memref.realloc", "memref.dealloc", "memref.dim",
    "memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.copy",
    "memref.collapse_shape", "memref.expand_shape", "memref.transpose",
    "memref.extract_strided_metadata", "memref.extract_aligned_pointer_as_index",
    "memref.assume_alignment", "memref.alloca_scope", "memref.alloca_scope.return",
    "memref.get_global", "scf.for", "scf.if", "scf.while", "scf.yield", "scf.condition",
    "scf.execute_region", "scf.index_switch", "func.func", "func.call", "func.return",
}  # fmt: skip
#: Element accesses -> which operand is the stored (or padding) value: its
#: i1 value goes through arith.extui; i1 results get an arith.trunci.
#: None: no stored value; "last": the last operand; "scalar": the one
#: scalar i1 operand (a transfer's padding; masks are vectors).
_ACCESSES: dict[str, int | str | None] = {
    "memref.load": None, "vector.load": None,
    "memref.store": 0, "vector.store": 0, "vector.transfer_write": 0,
    "vector.maskedstore": "last", "vector.scatter": "last",
    "vector.maskedload": "last", "vector.gather": "last",
    "vector.transfer_read": "scalar", "linalg.fill": 0,
}  # fmt: skip


def _is_bool(ty: ir.Type) -> bool:
    """i1, or a shaped type (memref, vector) of i1."""
    if isinstance(ty, ir.ShapedType):
        ty = ir.ShapedType(ty).element_type
    return isinstance(ty, ir.IntegerType) and ir.IntegerType(ty).width == 1


def _is_bool_buffer(ty: ir.Type) -> bool:
    return isinstance(ty, ir.MemRefType) and _is_bool(ty)


def _widened(ty: ir.Type) -> ir.Type:
    """The i8 form of an i1 scalar, vector, tensor or memref type."""
    i8 = ir.IntegerType.get_signless(8, ty.context)
    loc = ir.Location.unknown(ty.context)
    if isinstance(ty, ir.MemRefType):
        mt = ir.MemRefType(ty)
        return ir.MemRefType.get(mt.shape, i8, mt.layout, mt.memory_space, loc=loc)
    if isinstance(ty, ir.VectorType):
        vt = ir.VectorType(ty)
        return ir.VectorType.get(vt.shape, i8, scalable=vt.scalable_dims, loc=loc)
    if isinstance(ty, ir.RankedTensorType):
        return ir.RankedTensorType.get(ir.RankedTensorType(ty).shape, i8, loc=loc)
    return i8


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


def _widened_sparse(init: ir.Attribute, wide: ir.MemRefType) -> ir.Attribute:
    """An i1 ``sparse<indices, values>`` initial value (``arith.constant sparse<...>``,
    a mask) as the same ``sparse<...>`` of i8 values."""
    indices, values = sparse_parts(init)
    i8 = wide.element_type
    count = len(values)
    if values.is_splat:
        bits = np.full(count, bool(ir.BoolAttr(values.get_splat_value()).value), np.int8)
    else:
        bits = np.array([int(bool(values[i])) for i in range(count)], np.int8)
    loc = ir.Location.unknown(init.context)
    vty = ir.RankedTensorType.get([count], i8, loc=loc)
    tensor = ir.RankedTensorType.get(wide.shape, i8, loc=loc)
    return sparse_elements(tensor, indices, ir.DenseElementsAttr.get(bits, type=vty))


def _retype_global(get_global: ir.Operation, table: ir.SymbolTable) -> None:
    """The ``memref.global`` a ``memref.get_global`` reads: i8 type and initial value."""
    name = ir.FlatSymbolRefAttr(get_global.attributes["name"]).value
    glob = table[name].operation
    mt = ir.MemRefType(ir.TypeAttr(glob.attributes["type"]).value)
    if not _is_bool(mt):
        return  # another get_global of the same global already retyped it
    glob.attributes["type"] = ir.TypeAttr.get(_widened(mt))
    init = glob.attributes["initial_value"] if "initial_value" in glob.attributes else None
    if init is not None and is_sparse_elements(init):
        glob.attributes["initial_value"] = _widened_sparse(init, _widened(mt))
        return
    if init is None or not isinstance(init, ir.DenseIntElementsAttr):
        return  # uninitialized
    dense = ir.DenseIntElementsAttr(init)
    bits = [int(bool(dense[i])) for i in range(len(dense))]
    shape = ir.ShapedType(dense.type).shape
    values = np.array(bits, dtype=np.int8).reshape(shape)
    wide = _widened(dense.type)
    glob.attributes["initial_value"] = ir.DenseElementsAttr.get(values, type=wide)


def _module_of(op: ir.Operation) -> ir.Operation:
    while op.name != "builtin.module" and op.parent is not None:
        op = op.parent
    return op


def _stored_operand(op: ir.Operation) -> int | None:
    how = _ACCESSES[op.name]
    if how == "last":
        return len(op.operands) - 1
    if how == "scalar":
        scalars = [n for n, v in enumerate(op.operands) if isinstance(v.type, ir.IntegerType)]
        return next((n for n in scalars if _is_bool(op.operands[n].type)), None)
    return how if isinstance(how, int) else None


def _fix_access(op: ir.Operation) -> None:
    """Extend the stored value to i8; truncate what is read back to i1."""
    at = _stored_operand(op)
    with ir.InsertionPoint(op), op.location:
        if at is not None and _is_bool(op.operands[at].type):
            value = op.operands[at]
            op.operands[at] = arith.ExtUIOp(_widened(value.type), value).result
        for region in op.regions:  # linalg.fill's body
            for arg in region.blocks[0].arguments:
                arg.set_type(_widened(arg.type))
    for result in op.results:
        if not _is_bool(result.type) or isinstance(result.type, ir.MemRefType):
            continue
        narrow = result.type
        result.set_type(_widened(narrow))
        with ir.InsertionPoint(op), op.location:
            back = arith.TruncIOp(narrow, result)
        back.operation.move_after(op)
        result.replace_all_uses_except(back.result, back.operation)


def _reads_or_writes_bool_buffer(op: ir.Operation) -> bool:
    return op.name in _ACCESSES and any(_is_bool_buffer(v.type) for v in op.operands)


@dataclasses.dataclass(frozen=True)
class WidenBoolBuffersPass(SparsecompPass):
    """Store i1 buffers as i8 (memref<?xi1> -> memref<?xi8>).

    The MLIR build sparsecomp pins asserts (and kills the process) when
    ``finalize-memref-to-llvm`` lowers a ``memref.store`` to an ``i1``
    buffer. Such buffers come from the upstream sparsifier (the "filled"
    flags of its expanded access pattern: SpGEMM, sparse-output SDDMM),
    from ``buffer-deallocation-pipeline`` (the ownership flags of its
    ``dealloc_helper``) and from programs (``tensor<...xi1>`` constants and
    results). LLVM stores ``i1`` in a byte anyway, so the layout in memory
    does not change: every memref value, function signature and
    ``memref.global`` with element type ``i1`` gets ``i8``; what loads
    (``memref.load``, vector loads, gathers and transfers) read is followed
    by ``arith.trunci`` and what stores, fills, paddings and pass-through
    values write goes through ``arith.extui`` (masks stay ``i1``).

    It runs on buffers: in the fallback where the sparsifier's storage is
    explicit, and in ``sparsecomp-cpu-backend`` after linalg and n-D vector
    transfers became loops. If an ``i1`` buffer has a user other than
    allocations, views, metadata, copies, element accesses,
    ``linalg.fill``, ``scf``/``func`` control flow and globals, nothing
    changes; if the module also stores to an ``i1`` buffer (which would
    abort the lowering) that user is an error.

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
        if not values:
            return
        users = [use.owner for v in values for use in v.uses]
        others = [u for u in users if u.name not in _CARRIERS and u.name not in _ACCESSES]
        if others:
            if any(o.name == "memref.store" and _is_bool_buffer(o.operands[1].type) for o in ops):
                others[0].location.emit_error(
                    f"'{others[0].name}' uses an i1 buffer, which "
                    f"{self.NAME} cannot store as i8 (lowering stores to i1 buffers "
                    "is not supported)"
                )
                pass_.signal_pass_failure()
            return
        accesses = [o for o in ops if _reads_or_writes_bool_buffer(o)]
        for o in ops:
            if o.name == "func.func":
                _retype_function(o)
            elif o.name == "memref.get_global" and _is_bool_buffer(o.results[0].type):
                _retype_global(o, ir.SymbolTable(_module_of(o)))
        for v in values:
            v.set_type(_widened(v.type))
        for o in accesses:
            _fix_access(o)
