// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu)' | FileCheck %s

// The whole program reaches the LLVM dialect: an OpenMP row loop, masked
// vector loads, and the C interface the runtime calls.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx, avx2], vector_bits = 256, threads = 0>}} {
  // CHECK: llvm.func @spmm
  // CHECK: omp.parallel
  // CHECK: llvm.intr.masked.load
  // CHECK: llvm.func @_mlir_ciface_spmm
  func.func @spmm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}
