// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-parallelize)' | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(canonicalize, sparse-iter-parallelize)' | FileCheck %s --check-prefix=CANON --enable-var-scope

// A marked result-free loop becomes scf.parallel with the same bounds and body.
// CHECK-LABEL: func.func @row_loop
// CHECK-SAME: (%[[X:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK: scf.parallel (%[[I:.*]]) = (%[[C0]]) to (%[[M]]) step (%[[C2]]) {
// CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]]]
// CHECK-NEXT: memref.store %[[V]], %[[Y]][%[[I]]]
// CHECK-NEXT: scf.reduce
// CHECK-NEXT: }
// CHECK-NOT: sparse_iter.parallel
func.func @row_loop(%x: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %m step %c2 {
    %v = memref.load %x[%i] : memref<?xf32>
    memref.store %v, %y[%i] : memref<?xf32>
  } {sparse_iter.parallel}
  return
}

// -----

// Only the outermost marked loop of a nest becomes parallel; the inner mark is dropped.
// CHECK-LABEL: func.func @nested_marks
// CHECK: scf.parallel
// CHECK-NEXT: scf.for
// CHECK-NOT: sparse_iter.parallel
// CHECK: scf.reduce
func.func @nested_marks(%a: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %m step %c1 {
    scf.for %j = %c0 to %n step %c1 {
      memref.store %zero, %a[%i, %j] : memref<?x?xf32>
    } {sparse_iter.parallel}
  } {sparse_iter.parallel}
  return
}

// -----

// A marked loop inside a sequential loop that carries a value is parallelized.
// CHECK-LABEL: func.func @inner_of_sequential
// CHECK: scf.for {{.*}} iter_args
// CHECK: scf.parallel
// CHECK-NOT: sparse_iter.parallel
func.func @inner_of_sequential(%a: memref<?xf32>, %m: index, %t: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %t step %c1 iter_args(%s = %zero) -> (f32) {
    scf.for %i = %c0 to %m step %c1 {
      memref.store %s, %a[%i] : memref<?xf32>
    } {sparse_iter.parallel}
    %v = memref.load %a[%c0] : memref<?xf32>
    %s2 = arith.addf %s, %v : f32
    scf.yield %s2 : f32
  }
  return %r : f32
}

// -----

// A marked loop that still carries a value stays sequential, without the mark.
// CHECK-LABEL: func.func @negative_reduction
// CHECK: scf.for {{.*}} iter_args
// CHECK-NOT: scf.parallel
// CHECK-NOT: sparse_iter.parallel
// CHECK: return
func.func @negative_reduction(%x: memref<?xf32>, %m: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%s = %zero) -> (f32) {
    %v = memref.load %x[%i] : memref<?xf32>
    %s2 = arith.addf %s, %v : f32
    scf.yield %s2 : f32
  } {sparse_iter.parallel}
  return %r : f32
}

// -----

// A buffer every iteration yields back unchanged (what bufferization leaves
// of an output tensor carried by a row loop) keeps the loop sequential until
// canonicalize drops it; canonicalize keeps the mark.
// CHECK-LABEL: func.func @carried_buffer
// CHECK: scf.for {{.*}} iter_args
// CHECK-NOT: sparse_iter.parallel
// CANON-LABEL: func.func @carried_buffer
// CANON-SAME: (%[[Y:.*]]: memref<?xf32>
// CANON: scf.parallel
// CANON: memref.store %{{.*}}, %[[Y]]
// CANON: return %[[Y]]
func.func @carried_buffer(%y: memref<?xf32>, %m: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%b = %y) -> (memref<?xf32>) {
    memref.store %one, %b[%i] : memref<?xf32>
    scf.yield %b : memref<?xf32>
  } {sparse_iter.parallel}
  return %r : memref<?xf32>
}

// -----

// Induction variables of other integer types stay sequential, without the mark.
// CHECK-LABEL: func.func @negative_i32_induction
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK-NOT: sparse_iter.parallel
func.func @negative_i32_induction(%x: memref<?xi32>, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %m step %c1 : i32 {
    %ii = arith.index_cast %i : i32 to index
    memref.store %i, %x[%ii] : memref<?xi32>
  } {sparse_iter.parallel}
  return
}

// -----

// Unmarked loops are never touched.
// CHECK-LABEL: func.func @negative_unmarked
// CHECK: scf.for
// CHECK-NOT: scf.parallel
func.func @negative_unmarked(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %m step %c1 {
    memref.store %one, %y[%i] : memref<?xf32>
  }
  return
}

// -----

// A part's row-length bound (sparse_iter.min_row_entries, set by the loop
// lowering for hyb's rest) stays on the parallel loop for the GPU schedule.
// CHECK-LABEL: func.func @keeps_row_length_bound
// CHECK: scf.parallel
// CHECK: } {sparse_iter.min_row_entries = 33 : i64}
func.func @keeps_row_length_bound(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %m step %c1 {
    memref.store %one, %y[%i] : memref<?xf32>
  } {sparse_iter.parallel, sparse_iter.min_row_entries = 33 : i64}
  return
}
