"""Pass ``sparse-iter-huge-pages``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, func, memref, scf
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

MADVISE = "madvise"
#: Linux ``MADV_HUGEPAGE`` (asm-generic/mman-common.h, the same on every architecture).
MADV_HUGEPAGE = 14
#: The transparent huge page size of x86-64 (and of AArch64 with 4 KiB pages).
HUGE_PAGE = 2 << 20


def _element_bytes(ty: ir.MemRefType) -> int | None:
    """Bytes per element (None: a type without a plain bit width, e.g. complex)."""
    element = ty.element_type
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.IntegerType | ir.FloatType):
        return max(element.width // 8, 1)
    return None


def _byte_size(alloc: ir.Operation, element_bytes: int) -> ir.Value:
    """The allocation's size in bytes, as an ``index`` (sizes from ``memref.dim``)."""
    ty = ir.MemRefType(alloc.results[0].type)
    index = ir.IndexType.get()
    size = arith.constant(index, element_bytes)
    for d, extent in enumerate(ty.shape):
        dim = (
            memref.dim(alloc.results[0], arith.constant(index, d))
            if ty.is_dynamic_dim(d)
            else arith.constant(index, extent)
        )
        size = arith.muli(size, dim)
    return size


def _advise(alloc: ir.Operation, min_bytes: int) -> bool:
    """After ``alloc``: madvise its whole huge pages when it has ``min_bytes`` or more.

    False (nothing added) for elements without a plain bit width.
    """
    element_bytes = _element_bytes(ir.MemRefType(alloc.results[0].type))
    if element_bytes is None:
        return False
    index, i32 = ir.IndexType.get(), ir.IntegerType.get_signless(32)
    with ir.InsertionPoint.after(alloc), alloc.location:
        size = _byte_size(alloc, element_bytes)
        big = arith.cmpi(arith.CmpIPredicate.uge, size, arith.constant(index, min_bytes))
        branch = scf.IfOp(big)
        with ir.InsertionPoint(branch.then_block):
            base = memref.extract_aligned_pointer_as_index(alloc.results[0])
            page = arith.constant(index, HUGE_PAGE)
            mask = arith.constant(index, -HUGE_PAGE)
            start = arith.andi(arith.addi(base, arith.subi(page, arith.constant(index, 1))), mask)
            end = arith.andi(arith.addi(base, size), mask)
            length = arith.subi(arith.maxui(end, start), start)
            func.call([i32], ir.FlatSymbolRefAttr.get(MADVISE),
                      [start, length, arith.constant(i32, MADV_HUGEPAGE)])  # fmt: skip
            scf.yield_([])
    return True


def _signature() -> ir.FunctionType:
    index, i32 = ir.IndexType.get(), ir.IntegerType.get_signless(32)
    return ir.FunctionType.get([index, index, i32], [i32])


def _declared(module: ir.Operation) -> ir.Operation | None:
    """The module's own ``madvise`` symbol, if it has one."""
    table = ir.SymbolTable(module)
    return table[MADVISE].operation if MADVISE in table else None


def _declare(module: ir.Operation) -> None:
    """``func.func private @madvise(index, index, i32) -> i32`` at the top of ``module``."""
    with ir.InsertionPoint.at_block_begin(module.regions[0].blocks[0]), module.location:
        decl = func.FuncOp(MADVISE, _signature())
        decl.sym_visibility = ir.StringAttr.get("private")


@dataclasses.dataclass(frozen=True)
class HugePagesPass(SparsecompPass):
    """Back large heap buffers by transparent huge pages (Linux ``madvise``).

    A kernel ``malloc``\\ s its results. Blocks of 32 MiB and more are fresh
    ``mmap``\\ s every call, so writing a 32 MiB SpMM output took 8192 page
    faults of 4 KiB each: on this project's 2-core machine, more time than the
    product itself. After each ``memref.alloc`` of ``min-bytes`` or more
    (checked at run time on the dynamic sizes) this pass calls
    ``madvise(start, length, MADV_HUGEPAGE)`` on the whole 2 MiB pages inside
    the block, before anything touches it, so that it faults 2 MiB at a time;
    numpy does the same for its arrays of 4 MiB and more. The advice changes
    no contents and is free to fail (on kernels without transparent huge
    pages it returns an error, which is ignored); ``madvise`` is declared in
    the module (libc provides it). Buffers of elements without a plain bit
    width (complex) are left alone. Runs on buffers, before lowering to LLVM.

    Error: the module has its own ``@madvise`` of another type.

    Option: ``min-bytes`` (> 0; default 4 MiB).

    Before:

    ```mlir
    %buf = memref.alloc(%m, %n) : memref<?x?xf32>
    ```

    After:

    ```mlir
    %buf = memref.alloc(%m, %n) : memref<?x?xf32>
    %bytes = ... 4 * %m * %n ...
    %big = arith.cmpi uge, %bytes, %c4194304 : index
    scf.if %big {
      %p = memref.extract_aligned_pointer_as_index %buf : memref<?x?xf32> -> index
      ... %start, %length: the 2 MiB pages inside [%p, %p + %bytes) ...
      %0 = func.call @madvise(%start, %length, %c14_i32) : (index, index, i32) -> i32
    }
    ```
    """

    NAME = "sparse-iter-huge-pages"
    min_bytes: int = 4 << 20

    def __post_init__(self) -> None:
        if not 0 < self.min_bytes < 2**63:
            raise ValueError(f"min-bytes must be > 0 and < 2^63, got {self.min_bytes}")

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        allocs = [inner for inner in preorder(op) if inner.name == "memref.alloc"]
        if not allocs:
            return
        existing = _declared(op)
        if existing is not None:
            ty = existing.attributes["function_type"] if existing.name == "func.func" else None
            if ty is None or ir.TypeAttr(ty).value != _signature():
                existing.location.emit_error(
                    f"sparse-iter-huge-pages: the module defines '@{MADVISE}' as something other "
                    f"than libc's madvise {_signature()}; rename it"
                )
                pass_.signal_pass_failure()
                return
        if any([_advise(alloc, self.min_bytes) for alloc in allocs]) and existing is None:
            _declare(op)
