// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gather-lanes='lanes=8' --canonicalize --cse | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gather-lanes | FileCheck %s --check-prefix=TARGET --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gather-lanes='lanes=0' | FileCheck %s --check-prefix=OFF

// SpMV's row on buffers: a row of at least 8 entries runs them 8 at a time,
// each lane's loads its own (x read one by one: no vector.gather), the values
// put together with vector.from_elements and multiplied on vectors, one
// horizontal sum, then the row's last entries in the original loop; a
// shorter row runs the original loop. Both run fewer than 8 iterations, and
// their bounds say so (start + (count & 7)), so that LLVM leaves them scalar.
// CHECK-LABEL: func.func @spmv_row
// CHECK-SAME: (%[[CRD:[^:]+]]: memref<?xi32>, %[[VAL:[^:]+]]: memref<?xf32>, %[[X:[^:]+]]: memref<?xf32>, %[[LO:[^:]+]]: index, %[[HI:[^:]+]]: index, %[[INIT:[^:]+]]: f32)
// CHECK: %[[COUNT:.*]] = arith.subi %[[HI]], %[[LO]] : index
// CHECK: %[[ROUND:.*]] = arith.andi %[[COUNT]], %c-8 : index
// CHECK: %[[FULL:.*]] = arith.addi %[[LO]], %[[ROUND]] : index
// CHECK: %[[REST:.*]] = arith.andi %[[COUNT]], %c7 : index
// CHECK: %[[TAIL_END:.*]] = arith.addi %[[FULL]], %[[REST]] : index
// CHECK: %[[SHORT_END:.*]] = arith.addi %[[LO]], %[[REST]] : index
// CHECK: %[[SOME:.*]] = arith.cmpi ult, %[[LO]], %[[FULL]] : index
// CHECK: %[[R:.*]] = scf.if %[[SOME]] -> (f32) {
// CHECK: %[[V:.*]] = scf.for %[[Q:.*]] = %[[LO]] to %[[FULL]] step %c8 iter_args(%[[VA:.*]] = %{{.*}}) -> (vector<8xf32>) {
// CHECK-COUNT-8: memref.load %[[CRD]]
// CHECK-COUNT-8: memref.load %[[VAL]]
// CHECK-COUNT-8: memref.load %[[X]]
// CHECK-NOT: vector.gather
// CHECK: %[[VV:.*]] = vector.from_elements {{.*}} : vector<8xf32>
// CHECK: %[[VX:.*]] = vector.from_elements {{.*}} : vector<8xf32>
// CHECK: %[[M:.*]] = arith.mulf %[[VV]], %[[VX]] fastmath<reassoc,contract> : vector<8xf32>
// CHECK: %[[S:.*]] = arith.addf %[[VA]], %[[M]] fastmath<reassoc,contract> : vector<8xf32>
// CHECK: scf.yield %[[S]] : vector<8xf32>
// CHECK: %[[SUM:.*]] = vector.reduction <add>, %[[V]], %[[INIT]] fastmath<reassoc,contract> : vector<8xf32> into f32
// CHECK: %[[TAIL:.*]] = scf.for %{{.*}} = %[[FULL]] to %[[TAIL_END]] step %c1 iter_args(%{{.*}} = %[[SUM]]) -> (f32)
// CHECK: scf.yield %[[TAIL]] : f32
// CHECK: } else {
// CHECK: %[[PLAIN:.*]] = scf.for %{{.*}} = %[[LO]] to %[[SHORT_END]] step %c1 iter_args(%{{.*}} = %[[INIT]]) -> (f32)
// CHECK: scf.yield %[[PLAIN]] : f32
// CHECK: return %[[R]] : f32
// Without the option the function's target decides: none here, so nothing changes.
// TARGET-LABEL: func.func @spmv_row(
// TARGET-NOT: vector.from_elements
// TARGET: return
// OFF-LABEL: func.func @spmv_row
// OFF-NOT: scf.if
func.func @spmv_row(%crd: memref<?xi32>, %val: memref<?xf32>, %x: memref<?xf32>, %lo: index, %hi: index, %init: f32) -> f32 {
  %c1 = arith.constant 1 : index
  %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %init) -> (f32) {
    %c = memref.load %crd[%p] : memref<?xi32>
    %j = arith.index_cast %c : i32 to index
    %v = memref.load %val[%p] : memref<?xf32>
    %xv = memref.load %x[%j] : memref<?xf32>
    %m = arith.mulf %v, %xv fastmath<reassoc,contract> : f32
    %a = arith.addf %acc, %m fastmath<reassoc,contract> : f32
    scf.yield %a : f32
  }
  return %s : f32
}

// -----

// The target decides: tuned for AMD with 256-bit vectors, 4 lanes of f64.
// TARGET-LABEL: func.func @spmv_row_f64
// TARGET: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<4xf64>)
// TARGET: vector.from_elements {{.*}} : vector<4xf64>
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 2, tune = amd>}} {
  func.func @spmv_row_f64(%crd: memref<?xi64>, %val: memref<?xf64>, %x: memref<?xf64>, %lo: index, %hi: index) -> f64 {
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0.0 : f64
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f64) {
      %c = memref.load %crd[%p] : memref<?xi64>
      %j = arith.index_cast %c : i64 to index
      %v = memref.load %val[%p] : memref<?xf64>
      %xv = memref.load %x[%j] : memref<?xf64>
      %m = arith.mulf %v, %xv fastmath<reassoc,contract> : f64
      %a = arith.addf %acc, %m fastmath<reassoc,contract> : f64
      scf.yield %a : f64
    }
    return %s : f64
  }
}

// -----

// Left as they are: a sum that reads no gathered value (a row sum: LLVM's own
// vectorizer reads its contiguous values with vector loads), and a sum whose
// add may not be reassociated.
// CHECK-LABEL: func.func @row_sum
// CHECK-NOT: vector.from_elements
// CHECK-LABEL: func.func @strict_sum
// CHECK-NOT: vector.from_elements
// CHECK: return
func.func @row_sum(%val: memref<?xf32>, %lo: index, %hi: index) -> f32 {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %val[%p] : memref<?xf32>
    %a = arith.addf %acc, %v fastmath<reassoc,contract> : f32
    scf.yield %a : f32
  }
  return %s : f32
}
func.func @strict_sum(%crd: memref<?xi32>, %x: memref<?xf32>, %lo: index, %hi: index) -> f32 {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
    %c = memref.load %crd[%p] : memref<?xi32>
    %j = arith.index_cast %c : i32 to index
    %xv = memref.load %x[%j] : memref<?xf32>
    %a = arith.addf %acc, %xv : f32
    scf.yield %a : f32
  }
  return %s : f32
}
