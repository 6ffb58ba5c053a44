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

  // Elementwise ops on whole tensors become linalg.generic ops (nothing else
  // bufferizes them): a sum of two sparse matrices, then exp of a dense vector.
  // The sum's init is its first operand, not tensor.empty, so the function goes
  // to the upstream sparsifier (it computes it).
  // CHECK-LABEL: func.func @elementwise
  // CHECK-SAME: sparse_iter.upstream = "{{.*}}a computed sparse output's init must be tensor.empty
  // CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x?xf32, #sparse
  // CHECK: arith.addf
  // CHECK: linalg.generic
  // CHECK: math.exp
  // CHECK-NOT: arith.addf {{.*}} : tensor
  func.func @elementwise(%A: tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>,
                         %B: tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>,
                         %x: tensor<?xf32>)
      -> (tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>, tensor<?xf32>) {
    %C = arith.addf %A, %B : tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>
    %e = math.exp %x : tensor<?xf32>
    return %C, %e : tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>, tensor<?xf32>
  }

  // CHECK-LABEL: func.func @nnz
  // CHECK-SAME: tensor<?x?xf32, #sparse{{[0-9]*}}>
  // CHECK-SAME: sparse_iter.upstream = "uses 'sparse_tensor.number_of_entries'
  func.func @nnz(%A: tensor<?x?xf32, #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>>) -> index {
    %n = sparse_tensor.number_of_entries %A : tensor<?x?xf32, #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>>
    return %n : index
  }
}
