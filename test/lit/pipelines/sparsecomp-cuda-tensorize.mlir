// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-layouts, sparsecomp-cuda-tensorize)' | FileCheck %s

// A program as a user writes it: the sparsity annotation (dense 16x8
// blocks) resolves to BSR 16x8 for the CUDA target, and the product goes to
// the tensor-core kernel.
// CHECK-LABEL: func.func @spmm
// CHECK: call @__sparse_iter_bsr_mma_16x8_f32_i32_i32_w4t4
// CHECK: func.func private @__sparse_iter_bsr_mma_16x8_f32_i32_i32_w4t4
// CHECK: nvgpu.mma.sync
#bsr = #sparse_iter.sparsity<block[16, 8], density = 0.1>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @spmm(%A: tensor<?x?xf32, #bsr>, %B: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0.0 : f32
    %m = tensor.dim %A, %c0 : tensor<?x?xf32, #bsr>
    %n = tensor.dim %B, %c1 : tensor<?x?xf32>
    %e = tensor.empty(%m, %n) : tensor<?x?xf32>
    %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr>, tensor<?x?xf32>)
                       outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}
