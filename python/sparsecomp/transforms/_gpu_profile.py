"""The profiler's instrumentation of a launch (``sparse-iter-emulate-gpu{profile=true}``).

:func:`declare_profile` adds a hook global, which the runtime points at its
recorder (null: record nothing), and the function every access calls;
:func:`instrument` calls it before each global load and store of a launch
body with the site, the byte address and size, the block and the thread,
and before each ``nvgpu.mma.sync`` / ``mma.sp.sync`` with its shape (kind 2, 3
or 4: tf32, f16, 2:4 f16).
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, func, memref, scf, vector

from sparsecomp.transforms._shared_memory import is_workgroup

#: What ``profile=true`` adds to the module: a hook the runtime points at its
#: recorder (null: record nothing) and the function every access calls.
HOOK = "sparsecomp_emu_hook"
ACCESS = "sparsecomp_emu_access"
_PROFILE_DECLS = f"""
llvm.mlir.global external @{HOOK}() {{addr_space = 0 : i32}} : !llvm.ptr {{
  %0 = llvm.mlir.zero : !llvm.ptr
  llvm.return %0 : !llvm.ptr
}}
func.func private @{ACCESS}(%site: i64, %addr: i64, %bytes: i64, %block: i64, %thread: i64,
                            %store: i64) {{
  %g = llvm.mlir.addressof @{HOOK} : !llvm.ptr
  %fp = llvm.load %g : !llvm.ptr -> !llvm.ptr
  %null = llvm.mlir.zero : !llvm.ptr
  %set = llvm.icmp "ne" %fp, %null : !llvm.ptr
  scf.if %set {{
    llvm.call %fp(%site, %addr, %bytes, %block, %thread, %store)
        : !llvm.ptr, (i64, i64, i64, i64, i64, i64) -> ()
  }}
  return
}}
"""


def declare_profile(module: ir.Operation) -> None:
    """Add the hook global and the access function to ``module`` (once)."""
    body = module.regions[0].blocks[0]
    if ACCESS in ir.SymbolTable(module):
        return
    decls = ir.Module.parse(_PROFILE_DECLS, context=module.context)
    first = body.operations[0].operation
    for decl in list(decls.body.operations):
        decl.operation.move_before(first)


def _i64(value: ir.Value) -> ir.Value:
    return arith.index_cast(ir.IntegerType.get_signless(64), value)


def _element_bytes(ty: ir.Type) -> int:
    element = ir.MemRefType(ty).element_type
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.ComplexType):
        return 2 * ir.FloatType(ir.ComplexType(element).element_type).width // 8
    return max(1, element.width // 8)


#: Accesses the profiler reports: op -> (index of the memref operand, kind: 0 load,
#: 1 store, 5 atomic read-modify-write; ``sparsecomp.runtime.profile``'s codes).
_ACCESSES = {
    "memref.load": (0, 0),
    "memref.store": (1, 1),
    "memref.atomic_rmw": (1, 5),
    "vector.load": (0, 0),
    "vector.store": (1, 1),
    "vector.maskedload": (0, 0),
    "vector.maskedstore": (0, 1),
}


def _access_bytes(op: ir.Operation, memref_value: ir.Value) -> int:
    if op.name.startswith("vector."):
        if op.name.endswith("load"):
            value = op.results[0]
        else:
            value = op.operands[0] if op.name == "vector.store" else op.operands[-1]
        vec = ir.VectorType(value.type)
        return math.prod(vec.shape) * _element_bytes(ir.MemRefType.get([1], vec.element_type))
    return _element_bytes(memref_value.type)


def instrument(launch: ir.Operation, first_site: int) -> None:
    """Before every global load and store of the launch body, report the access.

    The address reported is the allocation's base times 256 plus the byte
    offset: every buffer starts on a 256-byte boundary, as ``cudaMalloc``'s
    do, whatever the host allocator gave, and distinct buffers stay apart.
    A vector access reports all its bytes (masked lanes too), and a masked one
    whose lanes are all off reports nothing: it touches no memory. (It did
    report, at its first lane's address: the BSR ``mma.sync`` kernel's stores of
    the column tile past the last column, all lanes off, fell on the next row's
    first columns, and counted as 756 writes of another block, cross-block
    races that were none, wherever ``N`` was not a multiple of 32.)
    """
    body = launch.regions[0].blocks[0]
    args = list(body.arguments)
    bx, by, bz, tx, ty, tz, gx, gy, _gz, sx, sy, _sz = args[:12]  # then workgroup buffers
    with ir.InsertionPoint.at_block_begin(body), launch.location:
        block = _i64(arith.addi(bx, arith.muli(gx, arith.addi(by, arith.muli(gy, bz)))))
        thread = _i64(arith.addi(tx, arith.muli(sx, arith.addi(ty, arith.muli(sy, tz)))))
    accesses: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _ACCESSES or op.name in ("nvgpu.mma.sync", "nvgpu.mma.sp.sync"):
            accesses.append(op)
        return ir.WalkResult.ADVANCE

    launch.walk(visit)
    i64 = ir.IntegerType.get_signless(64)
    for site, access in enumerate(accesses, start=first_site):
        if access.name in ("nvgpu.mma.sync", "nvgpu.mma.sp.sync"):
            _report_mma(access, site, block, thread)
            continue
        at, kind = _ACCESSES[access.name]
        memref_value = access.operands[at]
        ty = ir.MemRefType(memref_value.type)
        rank = ty.rank
        indices = list(access.operands[at + 1 : at + 1 + rank])
        if is_workgroup(ty) and kind in (0, 1):
            _report_shared(access, memref_value, indices, site, block, thread, kind + 6)
            continue
        if ty.memory_space is not None:
            continue  # private memory, or an atomic on workgroup memory: not global traffic
        with ir.InsertionPoint(access), access.location:
            index = ir.IndexType.get()
            pointer = memref.extract_aligned_pointer_as_index(memref_value)
            meta = memref.ExtractStridedMetadataOp(memref_value)
            linear = meta.results[1]
            for k, i in enumerate(indices):
                linear = arith.addi(linear, arith.muli(i, meta.results[2 + rank + k]))
            size = _element_bytes(memref_value.type)
            base = arith.muli(pointer, arith.constant(index, 256))
            address = arith.addi(base, arith.muli(linear, arith.constant(index, size)))
            report = [arith.constant(i64, site), _i64(address),
                      arith.constant(i64, _access_bytes(access, memref_value)),
                      block, thread, arith.constant(i64, kind)]  # fmt: skip
            if access.name in ("vector.maskedload", "vector.maskedstore"):
                mask = access.operands[at + 1 + rank]
                i1 = ir.IntegerType.get_signless(1)
                active = vector.reduction(i1, vector.CombiningKind.OR, mask)
                when = scf.IfOp(active)
                with ir.InsertionPoint(when.then_block):
                    func.call([], ACCESS, report)
                    scf.YieldOp([])
            else:
                func.call([], ACCESS, report)


def _report_shared(
    access: ir.Operation,
    value: ir.Value,
    indices: list[ir.Value],
    site: int,
    block: ir.Value,
    thread: ir.Value,
    kind: int,
) -> None:
    """Report a workgroup-memory access (kind 6 load, 7 store): the buffer's base times 256
    plus the byte offset from its static strides (the emulation gives each block its own
    buffer and changes the value's type, so no op here may depend on the memory space)."""
    ty = ir.MemRefType(value.type)
    strides, offset = ty.get_strides_and_offset()
    size = _element_bytes(value.type)
    i64 = ir.IntegerType.get_signless(64)
    index = ir.IndexType.get()
    with ir.InsertionPoint(access), access.location:
        linear = arith.constant(index, offset)
        for i, stride in zip(indices, strides, strict=True):
            linear = arith.addi(linear, arith.muli(i, arith.constant(index, stride)))
        pointer = memref.extract_aligned_pointer_as_index(value)
        base = arith.muli(pointer, arith.constant(index, 256))
        address = arith.addi(base, arith.muli(linear, arith.constant(index, size)))
        func.call([], ACCESS, [arith.constant(i64, site), _i64(address),
                               arith.constant(i64, _access_bytes(access, value)),
                               block, thread, arith.constant(i64, kind)])  # fmt: skip


def _report_mma(op: ir.Operation, site: int, block: ir.Value, thread: ir.Value) -> None:
    """Each lane reports the MMA: kind 2 (tf32), 3 (f16) or 4 (2:4 f16), its m*n*k as the size."""
    m, n, k = (int(d) for d in ir.ArrayAttr(op.attributes["mmaShape"]))
    kind = 2 if "tf32Enabled" in op.attributes else 3
    if op.name == "nvgpu.mma.sp.sync":
        kind = 4
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(op), op.location:
        values = [site, 0, m * n * k]
        func.call([], ACCESS, [*(arith.constant(i64, v) for v in values), block, thread,
                               arith.constant(i64, kind)])  # fmt: skip
