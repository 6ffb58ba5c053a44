// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cuda-schedule, sparsecomp-cuda-emulate)' | FileCheck %s

// The GPU schedule run on the host: loops over blocks and threads, lowered
// to the LLVM dialect like CPU code, with no OpenMP and no gpu op left.
// CHECK-LABEL: llvm.func @rows
// CHECK-NOT: omp.
// CHECK-NOT: gpu.
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @_mlir_ciface_rows
func.func @rows(%pos: tensor<?xi32>, %vals: tensor<?xf32>, %m: index) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty(%m) : tensor<?xf32>
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%acc = %e) -> (tensor<?xf32>) {
    %p = tensor.extract %pos[%i] : tensor<?xi32>
    %k = arith.index_castui %p : i32 to index
    %v = tensor.extract %vals[%k] : tensor<?xf32>
    %s = tensor.insert %v into %acc[%i] : tensor<?xf32>
    scf.yield %s : tensor<?xf32>
  } {sparse_iter.parallel}
  return %r : tensor<?xf32>
}
