// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-widen-bool-buffers | FileCheck %s --enable-var-scope

// The "filled" flags of the sparsifier's expanded access pattern: an i1
// buffer allocated, cleared, read and written in loops, passed to a helper.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[I:.*]]: index) -> i1
// CHECK: %[[B:.*]] = memref.load %[[M]][%[[I]]] : memref<?xi8>
// CHECK: %[[F:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK: return %[[F]] : i1
func.func private @helper(%m: memref<?xi1>, %i: index) -> i1 {
  %f = memref.load %m[%i] : memref<?xi1>
  return %f : i1
}

// CHECK-LABEL: func.func @expand
// CHECK: %[[M:.*]] = memref.alloc(%{{.*}}) : memref<?xi8>
// CHECK: %[[Z:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK: linalg.fill ins(%[[Z]] : i8) outs(%[[M]] : memref<?xi8>)
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[M]]) -> (memref<?xi8>)
// CHECK:   %[[T:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK:   memref.store %[[T]], %[[A]][%{{.*}}] : memref<?xi8>
// CHECK:   scf.yield %[[A]] : memref<?xi8>
// CHECK: call @helper(%[[R]], %{{.*}}) : (memref<?xi8>, index) -> i1
// CHECK: memref.dealloc %[[R]] : memref<?xi8>
func.func @expand(%n: index) -> i1 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %false = arith.constant false
  %true = arith.constant true
  %m = memref.alloc(%n) : memref<?xi1>
  linalg.fill ins(%false : i1) outs(%m : memref<?xi1>)
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %m) -> (memref<?xi1>) {
    memref.store %true, %a[%i] : memref<?xi1>
    scf.yield %a : memref<?xi1>
  }
  %f = func.call @helper(%r, %c0) : (memref<?xi1>, index) -> i1
  memref.dealloc %r : memref<?xi1>
  return %f : i1
}

// -----

// An i1 buffer used by an op the pass does not rewrite: nothing changes.
// CHECK-LABEL: func.func @negative_vector
// CHECK: memref.alloc(%{{.*}}) : memref<?xi1>
// CHECK: memref.store %{{.*}} : memref<?xi1>
// CHECK: vector.load %{{.*}} : memref<?xi1>, vector<4xi1>
func.func @negative_vector(%n: index) -> vector<4xi1> {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %m = memref.alloc(%n) : memref<?xi1>
  memref.store %true, %m[%c0] : memref<?xi1>
  %v = vector.load %m[%c0] : memref<?xi1>, vector<4xi1>
  return %v : vector<4xi1>
}
