// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-privatize-allocas | FileCheck %s --enable-var-scope

// The sparsifier's COO iterator scratch, allocated at the top of the function
// and used only in the parallel row loop: each iteration gets its own.
// CHECK-LABEL: func.func @coo_scratch
// CHECK-SAME: (%[[N:.*]]: index, %[[M:.*]]: memref<?xindex>)
// CHECK-NOT: memref.alloca
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-NEXT: %[[S:.*]] = memref.alloca(%{{.*}}) : memref<?x4xindex>
// CHECK: memref.store %[[I]], %[[S]]
// CHECK: scf.while
// CHECK: memref.load %[[S]]
func.func @coo_scratch(%n: index, %m: memref<?xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.alloca(%c1) : memref<?x4xindex>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %i, %s[%c0, %c0] : memref<?x4xindex>
    %w = scf.while (%k = %c0) : (index) -> index {
      %p = memref.load %s[%c0, %c0] : memref<?x4xindex>
      %lt = arith.cmpi ult, %k, %p : index
      scf.condition(%lt) %k : index
    } do {
    ^bb0(%k: index):
      %k1 = arith.addi %k, %c1 : index
      scf.yield %k1 : index
    }
    memref.store %w, %m[%i] : memref<?xindex>
    scf.reduce
  }
  return
}

// -----

// Nested parallel loops: the innermost one holding every use.
// CHECK-LABEL: func.func @nested
// CHECK: scf.parallel
// CHECK-NEXT: scf.parallel
// CHECK-NEXT: memref.alloca() : memref<2xf32>
func.func @nested(%n: index, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.alloca() : memref<2xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.parallel (%j) = (%c0) to (%n) step (%c1) {
      memref.store %x, %s[%c0] : memref<2xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// Used outside the loop too (its contents flow out), or by no parallel loop:
// the allocas stay.
// CHECK-LABEL: func.func @negative_used_after
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.constant
// CHECK-NEXT: %[[S:.*]] = memref.alloca() : memref<1xf32>
// CHECK-NEXT: scf.parallel
// CHECK: memref.load %[[S]]
func.func @negative_used_after(%n: index, %x: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.alloca() : memref<1xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %x, %s[%c0] : memref<1xf32>
    scf.reduce
  }
  %r = memref.load %s[%c0] : memref<1xf32>
  return %r : f32
}

// CHECK-LABEL: func.func @negative_sequential
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.constant
// CHECK-NEXT: memref.alloca() : memref<1xf32>
// CHECK-NEXT: scf.for
func.func @negative_sequential(%n: index, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.alloca() : memref<1xf32>
  scf.for %i = %c0 to %n step %c1 {
    memref.store %x, %s[%c0] : memref<1xf32>
  }
  return
}
