// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-bufferize)' | FileCheck %s

// Stage III on tensors in, memrefs out: read-only arguments, a fresh result
// buffer, the marked row loop kept for the back end that comes next.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %[[M:.*]]: index) -> memref<?xf32>
// CHECK-SAME: llvm.emit_c_interface
// CHECK: %[[OUT:.*]] = memref.alloc(%[[M]])
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK: } {sparse_iter.parallel}
// CHECK: return %[[OUT]]
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
