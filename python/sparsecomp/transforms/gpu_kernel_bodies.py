"""Pass ``sparse-iter-gpu-kernel-bodies``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.lowering.mma_sp_staged_kernels import NmMmaStaged, nm_spmm_staged
from sparsecomp.transforms.base import SparsecompPass


@dataclasses.dataclass(frozen=True)
class GpuKernelBodiesPass(SparsecompPass):
    """Define the tensor-core kernels that ``sparse-iter-gpu-tensorize`` declared.

    A kernel that stages its operands in a block's shared memory
    (:mod:`sparsecomp.lowering.mma_sp_staged_kernels`: 2:4 on ``mma.sp``)
    cannot be written before bufferization, as the other tensor-core kernels
    are: its deallocation pass refuses ``gpu.barrier`` (an op that declares
    no memory effects) and would give the launch's workgroup buffers
    ownership arguments. ``sparse-iter-gpu-tensorize`` therefore calls a
    private declaration whose name says the kernel's tiling, and this pass,
    after bufferization, replaces each such declaration with the kernel.
    Declarations of other functions are left as they are.

    ```mlir
    func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n4x4(
        memref<?xf16>, memref<?xi32>, memref<?x?xf16>, memref<?x?xf32>, memref<?x?xf32>)
    // becomes
    func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n4x4(%values: ...) {
      gpu.launch ... workgroup(%sa : memref<2x128x24xf16, #gpu.address_space<workgroup>>, ...) {
        ... nvgpu.device_async_copy ... gpu.barrier ... nvgpu.mma.sp.sync ... gpu.barrier ...
      }
      return
    }
    ```
    """

    NAME = "sparse-iter-gpu-kernel-bodies"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        body = op.regions[0].blocks[0]
        for function in [o.operation for o in body.operations]:
            if function.name != "func.func" or len(function.regions[0].blocks):
                continue
            spec = NmMmaStaged.from_name(ir.StringAttr(function.attributes["sym_name"]).value)
            if spec is None:
                continue
            kernel = ir.Module.parse(nm_spmm_staged(spec), context=op.context)
            defined = kernel.body.operations[0].operation
            declared = function.attributes["function_type"]
            if defined.attributes["function_type"] != declared:
                function.location.emit_error(
                    f"'{spec.name}' names a 2:4 tensor-core kernel of type "
                    f"{defined.attributes['function_type']}, but is declared {declared}"
                )
                pass_.signal_pass_failure()
                return
            ir.InsertionPoint(function).insert(defined.detach_from_parent())
            function.erase()
