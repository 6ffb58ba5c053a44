// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparsecomp-cpu-loops)' | FileCheck %s

// The target's 256-bit vectors give 8 lanes of f32 along SpMM's dense columns.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx, avx2], vector_bits = 256, threads = 0>}} {
  // CHECK-LABEL: func.func @spmm
  // CHECK-NOT: linalg.generic
  // CHECK: vector.transfer_read {{.*}} vector<8xf32>
  // CHECK: } {sparse_iter.parallel}
  func.func @spmm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, k)>],
                         iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}

// -----

// A scalar target (vector_bits = 0) gets the same loops without vectors.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {scalar = #sparse_iter.cpu<x86_64, features = [], vector_bits = 0, threads = 1>}} {
  // CHECK-LABEL: func.func @spmm_scalar
  // CHECK-NOT: vector.
  // CHECK: arith.mulf {{.*}} : f32
  // CHECK-NOT: vector.
  // CHECK: return
  func.func @spmm_scalar(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, k)>],
                         iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}
