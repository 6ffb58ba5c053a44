"""Misaligned accesses in the emulation: stopped where a GPU would fault.

Used by ``sparse-iter-emulate-gpu`` before a launch is emulated. A vector
load or store that declares an ``alignment`` (``ld.global.v4`` needs 16
bytes) and a ``cp.async`` (its source and target aligned to the bytes it
copies) at an address that is not so aligned stops a GPU kernel with a
misaligned-address fault, which ends the whole CUDA context. On the host the
same load usually just works, so a kernel whose alignment guard is wrong
would pass every emulated test. Each such access gets a check of its
address first; a misaligned one writes a message naming the access's
location to standard error and aborts the process, as the GPU context would
be lost (a bug of the kernel, not of its input: the kernels guard their
aligned paths).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref, scf

from sparsecomp.ir.parsing import location_text
from sparsecomp.transforms._shared_memory import is_workgroup

_VECTOR = ("vector.load", "vector.store", "vector.maskedload", "vector.maskedstore")


#: The function a failed check calls: its message to stderr, then ``abort``.
FAULT = "__sparsecomp_emulated_fault"
_FAULT_TEXT = f"""
llvm.mlir.global external @stderr() {{addr_space = 0 : i32}} : !llvm.ptr
llvm.func @fputs(!llvm.ptr, !llvm.ptr) -> i32
llvm.func @abort()
func.func private @{FAULT}(%message: !llvm.ptr) {{
  %stream = llvm.mlir.addressof @stderr : !llvm.ptr
  %file = llvm.load %stream : !llvm.ptr -> !llvm.ptr
  %written = llvm.call @fputs(%message, %file) : (!llvm.ptr, !llvm.ptr) -> i32
  llvm.call @abort() : () -> ()
  return
}}
"""


def check_alignment(launch: ir.Operation, module: ir.Operation) -> None:
    """Insert an address check before each access of the launch that needs alignment
    (the failure path's function and messages go into ``module``)."""
    found: list[tuple[ir.Operation, ir.Value, list[ir.Value], int]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _VECTOR and "alignment" in op.attributes:
            view = op.opview
            align = ir.IntegerAttr(op.attributes["alignment"]).value
            found.append((op, view.base, list(view.indices), align))
        elif op.name == "nvgpu.device_async_copy":
            view = op.opview
            element = ir.MemRefType(view.src.type).element_type
            size = ir.IntegerAttr(op.attributes["dstElements"]).value * _bytes(element)
            found.append((op, view.src, list(view.srcIndices), size))
            found.append((op, view.dst, list(view.dstIndices), size))
        return ir.WalkResult.ADVANCE

    launch.walk(visit)
    checks = [(op, buffer, indices, align) for op, buffer, indices, align in found if align > 1]
    if not checks:
        return
    _declare_fault(module)
    for op, buffer, indices, align in checks:
        _check(op, buffer, indices, align, module)


def _declare_fault(module: ir.Operation) -> None:
    body = module.regions[0].blocks[0]
    names = {ir.StringAttr(o.attributes["sym_name"]).value for o in body.operations
             if "sym_name" in o.attributes}  # fmt: skip
    if FAULT in names:
        return
    parsed = ir.Module.parse(_FAULT_TEXT, context=module.context)
    for op in list(parsed.body.operations):
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name not in names:  # a program may declare abort or fputs itself
            body.append(op.detach_from_parent())


def _message(module: ir.Operation, text: str) -> str:
    """A private constant holding ``text`` (a line, NUL-terminated); its symbol."""
    body = module.regions[0].blocks[0]
    prefix = "__sparsecomp_fault_message_"
    count = sum(1 for o in body.operations if o.name == "llvm.mlir.global"
                and ir.StringAttr(o.attributes["sym_name"]).value.startswith(prefix))  # fmt: skip
    name = f"{prefix}{count}"
    data = text.encode() + b"\n\0"
    escaped = "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else f"\\{c:02X}"
                      for c in data)  # fmt: skip
    global_text = (f'llvm.mlir.global private constant @{name}("{escaped}") '
                   f"{{addr_space = 0 : i32}} : !llvm.array<{len(data)} x i8>")  # fmt: skip
    parsed = ir.Module.parse(global_text, context=module.context)
    body.append(parsed.body.operations[0].detach_from_parent())
    return name


def _bytes(element: ir.Type) -> int:
    return max(1, ir.IntegerType(element).width // 8 if isinstance(element, ir.IntegerType)
               else ir.FloatType(element).width // 8)  # fmt: skip


def _check(op: ir.Operation, buffer: ir.Value, indices: list[ir.Value], align: int,
           module: ir.Operation) -> None:  # fmt: skip
    ty = ir.MemRefType(buffer.type)
    where = location_text(op.location, "<kernel>")
    message = _message(module, f"sparse-iter-emulate-gpu: {where}: '{op.name}' needs "
                       f"{align}-byte alignment and its address has none (a GPU faults: "
                       "misaligned address)")  # fmt: skip
    with ir.InsertionPoint(op), op.location:
        index = ir.IndexType.get()
        if is_workgroup(ty):  # static shape, identity layout: strides known
            strides, offset = _static_strides(ty), arith.constant(index, 0)
            stride_values = [arith.constant(index, s) for s in strides]
        else:
            rank = ty.rank
            metadata = memref.ExtractStridedMetadataOp(buffer)
            offset = metadata.results[1]
            stride_values = list(metadata.results)[2 + rank : 2 + 2 * rank]
        linear = offset
        for at, stride in zip(indices, stride_values, strict=True):
            linear = arith.addi(linear, arith.muli(at, stride))
        pointer = memref.extract_aligned_pointer_as_index(buffer)
        size = arith.constant(index, _bytes(ty.element_type))
        address = arith.addi(pointer, arith.muli(linear, size))
        remainder = arith.remui(address, arith.constant(index, align))
        misaligned = arith.cmpi(arith.CmpIPredicate.ne, remainder, arith.constant(index, 0))
        branch = scf.IfOp(misaligned)
        with ir.InsertionPoint(branch.then_block):
            ptr = ir.Type.parse("!llvm.ptr")
            text = ir.Operation.create(
                "llvm.mlir.addressof", results=[ptr],
                attributes={"global_name": ir.FlatSymbolRefAttr.get(message)},
            ).result  # fmt: skip
            func.CallOp([], FAULT, [text])
            scf.YieldOp([])


def _static_strides(ty: ir.MemRefType) -> list[int]:
    strides, running = [], 1
    for size in reversed(ty.shape):
        strides.append(running)
        running *= size
    return list(reversed(strides))
