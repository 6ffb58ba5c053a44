// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-lower-atomics | FileCheck %s --enable-var-scope

// A part whose rows other parts share (no sparse_iter.disjoint_rows): the row's
// sum starts from zero and is added to y atomically; the loop says so.
// CHECK-LABEL: func.func @row_sum_part
// CHECK-SAME: (%[[POS:.*]]: memref<?xindex>, %[[VAL:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-NOT: memref.load %[[Y]]
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[S:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]])
// CHECK: memref.atomic_rmw addf %[[S]], %[[Y]][%[[I]]]
// CHECK-NOT: memref.store
// CHECK: } {sparse_iter.atomic_writes, sparse_iter.parts_group = 0 : i64}
func.func @row_sum_part(%pos: memref<?xindex>, %val: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %y0 = memref.load %y[%i] : memref<?xf32>
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %y0) -> (f32) {
      %v = memref.load %val[%p] : memref<?xf32>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
    scf.reduce
  } {sparse_iter.parts_group = 0 : i64}
  return
}

// -----

// A one-slot ELL bucket: the add sits in the scf.if that skips padding; the
// kept branch then yields zero.
// CHECK-LABEL: func.func @ell_slot_part
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[N:.*]] = scf.if
// CHECK: arith.addf %[[ZERO]]
// CHECK: scf.yield %[[ZERO]]
// CHECK: memref.atomic_rmw addf %[[N]]
// CHECK: sparse_iter.atomic_writes
func.func @ell_slot_part(%rows: memref<?xindex>, %crd: memref<?xindex>, %val: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%k) = (%c0) to (%m) step (%c1) {
    %i = memref.load %rows[%k] : memref<?xindex>
    %y0 = memref.load %y[%i] : memref<?xf32>
    %j = memref.load %crd[%k] : memref<?xindex>
    %stored = arith.cmpi sge, %j, %c0 : index
    %n = scf.if %stored -> (f32) {
      %v = memref.load %val[%k] : memref<?xf32>
      %a = arith.addf %y0, %v : f32
      scf.yield %a : f32
    } else {
      scf.yield %y0 : f32
    }
    memref.store %n, %y[%i] : memref<?xf32>
    scf.reduce
  } {sparse_iter.parts_group = 0 : i64}
  return
}

// -----

// Left alone: parts with disjoint rows (no race), loops outside a group, and a
// part whose write is not an accumulation (it would lose the other parts').
// CHECK-LABEL: func.func @negative_cases
// CHECK-NOT: memref.atomic_rmw
// CHECK-NOT: sparse_iter.atomic_writes
func.func @negative_cases(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %y0 = memref.load %y[%i] : memref<?xf32>
    %a = arith.addf %y0, %one : f32
    memref.store %a, %y[%i] : memref<?xf32>
    scf.reduce
  } {sparse_iter.parts_group = 0 : i64, sparse_iter.disjoint_rows}
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %y0 = memref.load %y[%i] : memref<?xf32>
    %a = arith.addf %y0, %one : f32
    memref.store %a, %y[%i] : memref<?xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    memref.store %one, %y[%i] : memref<?xf32>
    scf.reduce
  } {sparse_iter.parts_group = 1 : i64}
  return
}
