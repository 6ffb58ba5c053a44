// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-drop-destination-results)' | FileCheck %s --enable-var-scope

// A result returned in its destination (here through a memref.cast) leaves the
// signature; the others stay in order; the attribute goes.
// CHECK-LABEL: func.func @built_there
// CHECK-SAME: (%[[D:[a-z0-9]+]]: memref<?xf32>, %[[N:[a-z0-9]+]]: index) -> index {
// CHECK-NOT: memref.copy
// CHECK: return %[[N]] : index
// CHECK-NOT: sparse_iter.destinations
func.func @built_there(%d: memref<?xf32>, %n: index) -> (memref<?xf32>, index)
    attributes {sparse_iter.destinations = array<i64: 0, -1>} {
  %c = memref.cast %d : memref<?xf32> to memref<?xf32>
  return %c, %n : memref<?xf32>, index
}

// -----

// A result built elsewhere is first copied into its destination.
// CHECK-LABEL: func.func @built_elsewhere
// CHECK-SAME: (%[[N:[a-z0-9]+]]: index, %[[D:[a-z0-9]+]]: memref<?xf32>) {
// CHECK: %[[A:[a-z0-9]+]] = memref.alloc
// CHECK: memref.copy %[[A]], %[[D]]
// CHECK-NEXT: return{{$}}
func.func @built_elsewhere(%n: index, %d: memref<?xf32>) -> memref<?xf32>
    attributes {sparse_iter.destinations = array<i64: 1>} {
  %a = memref.alloc(%n) : memref<?xf32>
  return %a : memref<?xf32>
}

// -----

// Functions without the attribute keep their results.
// CHECK-LABEL: func.func @plain
// CHECK-SAME: -> memref<?xf32>
func.func @plain(%d: memref<?xf32>) -> memref<?xf32> {
  return %d : memref<?xf32>
}

// -----

// A loop that carries the destination unchanged returns it: no copy.
// CHECK-LABEL: func.func @carried
// CHECK-SAME: (%[[N:[a-z0-9]+]]: index, %[[D:[a-z0-9]+]]: memref<?xf32>) {
// CHECK: scf.for
// CHECK-NOT: memref.copy
// CHECK: return{{$}}
func.func @carried(%n: index, %d: memref<?xf32>) -> memref<?xf32>
    attributes {sparse_iter.destinations = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%t = %d) -> (memref<?xf32>) {
    memref.store %zero, %t[%i] : memref<?xf32>
    scf.yield %t : memref<?xf32>
  }
  return %r : memref<?xf32>
}
