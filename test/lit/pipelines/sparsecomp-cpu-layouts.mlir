// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-layouts)' | FileCheck %s

// A sparsity annotation resolves to a layout for the module's target, and the
// named op is generalized for the sparse lowering. A function whose kernel
// sparse_iter cannot lower (here a sparse_tensor op) is marked for the
// upstream sparsifier and keeps #sparse_tensor types.
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx, avx2], vector_bits = 256, threads = 0>}} {
  // CHECK-LABEL: func.func @spmv
  // CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed)
  // CHECK-NOT: sparsity
  // CHECK-NOT: sparse_iter.upstream
  // CHECK: linalg.generic
  // CHECK-NOT: linalg.matvec
  func.func @spmv(%A: tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>,
                  %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
    %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>, tensor<?xf32>)
                       outs(%y : tensor<?xf32>) -> tensor<?xf32>
    return %r : tensor<?xf32>
  }

  // CHECK-LABEL: func.func @nnz
  // CHECK-SAME: tensor<?x?xf32, #sparse{{[0-9]*}}>
  // CHECK-SAME: sparse_iter.upstream = "uses 'sparse_tensor.number_of_entries'
  func.func @nnz(%A: tensor<?x?xf32, #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>>) -> index {
    %n = sparse_tensor.number_of_entries %A : tensor<?x?xf32, #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>>
    return %n : index
  }
}
