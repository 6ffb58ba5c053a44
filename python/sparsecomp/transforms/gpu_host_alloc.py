"""Pass ``sparse-iter-gpu-host-alloc``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import gpu
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Ops whose bodies run on the GPU: allocations inside them stay as they are.
_DEVICE_OPS = ("gpu.launch", "gpu.module", "gpu.func")


def _on_host(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name in _DEVICE_OPS:
            return False
        parent = parent.parent
    return True


@dataclasses.dataclass(frozen=True)
class GpuHostAllocPass(SparsecompPass):
    """Host allocations become GPU-visible memory: ``gpu.alloc host_shared``.

    After the CUDA schedule, a function's host code still allocates its
    results and scratch buffers with ``memref.alloc`` (``malloc``), and its
    ``gpu.launch`` bodies write them: on a GPU that is a write to host memory
    the device cannot reach. This pass turns every ``memref.alloc`` outside a
    ``gpu.launch`` / ``gpu.module`` into ``gpu.alloc host_shared`` (memory
    both the host code and the kernels use; the CUDA runtime backs it with
    ``cuMemAllocManaged``) and every ``memref.dealloc`` of such a buffer into
    ``gpu.dealloc``. Host code that reads or writes the buffer (sizes of
    sparse results, a host loop the schedule left) stays correct. Functions
    without a ``gpu.launch`` are left alone. ``memref.alloca`` stays: stack
    scratch is host-only.

    Before:

    ```mlir
    %C = memref.alloc(%m, %n) {alignment = 64 : i64} : memref<?x?xf32>
    gpu.launch blocks(...) threads(...) { memref.store %v, %C[%i, %j] ... }
    ```

    After:

    ```mlir
    %C = gpu.alloc host_shared (%m, %n) : memref<?x?xf32>
    gpu.launch blocks(...) threads(...) { memref.store %v, %C[%i, %j] ... }
    ```
    """

    NAME = "sparse-iter-gpu-host-alloc"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for func in op.regions[0].blocks[0].operations:
            func = func.operation
            if func.name != "func.func":
                continue
            ops = list(preorder(func))
            if not any(o.name == "gpu.launch" for o in ops):
                continue
            for alloc in ops:
                if alloc.name == "memref.alloc" and _on_host(alloc):
                    _replace_alloc(alloc)
            for dealloc in list(preorder(func)):
                if dealloc.name == "memref.dealloc" and _is_shared(dealloc.operands[0]):
                    with ir.InsertionPoint(dealloc), dealloc.location:
                        gpu.DeallocOp(None, [], dealloc.operands[0])
                    dealloc.erase()


def _replace_alloc(alloc: ir.Operation) -> None:
    dynamic = list(alloc.operands)
    symbols = []
    if "operandSegmentSizes" in alloc.attributes:
        sizes = ir.DenseI32ArrayAttr(alloc.attributes["operandSegmentSizes"])
        dynamic, symbols = dynamic[: sizes[0]], dynamic[sizes[0] :]
    with ir.InsertionPoint(alloc), alloc.location:
        shared = gpu.AllocOp(alloc.results[0].type, None, [], dynamic, symbols, hostShared=True)
    alloc.results[0].replace_all_uses_with(shared.results[0])
    alloc.erase()


def _is_shared(value: ir.Value) -> bool:
    owner = getattr(value.owner, "operation", value.owner)  # a Block for block arguments
    return isinstance(owner, ir.Operation) and owner.name == "gpu.alloc"
