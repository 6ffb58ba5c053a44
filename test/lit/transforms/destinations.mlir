// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-mark-entry-points, sparse-iter-destinations)' | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-mark-entry-points, sparse-iter-destinations, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map})' | FileCheck %s --check-prefix=BUF --enable-var-scope

// The result is built in a tensor.empty: the destination argument (and only
// it) becomes writable, takes the empty tensor's place (which is left for
// canonicalize to erase), and the materialization goes.
// Bufferized, the loop writes the argument itself: no allocation, no copy.
// CHECK-LABEL: func.func @fill
// CHECK-SAME: (%[[N:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: tensor<?xf32> {bufferization.writable = false},
// CHECK-SAME: %[[D:[a-z0-9]+]]: tensor<?xf32> {bufferization.writable = true})
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[D]])
// CHECK-NOT: materialize_in_destination
// CHECK: return
// BUF-LABEL: func.func @fill
// BUF-SAME: %[[D:[a-z0-9]+]]: memref<?xf32>) -> memref<?xf32>
// BUF-NOT: memref.alloc
// BUF: scf.for {{.*}} iter_args(%{{.*}} = %[[D]])
// BUF-NOT: memref.copy
// BUF: return
func.func @fill(%n: index, %x: tensor<?xf32>, %d: tensor<?xf32>) -> tensor<?xf32>
    attributes {sparse_iter.destinations = array<i64: 2>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%t = %e) -> (tensor<?xf32>) {
    %v = tensor.extract %x[%i] : tensor<?xf32>
    %w = tensor.insert %v into %t[%i] : tensor<?xf32>
    scf.yield %w : tensor<?xf32>
  }
  %m = bufferization.materialize_in_destination %r in %d : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %m : tensor<?xf32>
}

// -----

// A result already accumulated in its destination (an outs operand written in
// place) keeps its loop; the materialization goes before empty-tensor
// elimination, which would read it as a second write. Bufferized: in place.
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: %[[C:[a-z0-9]+]]: tensor<?xf32> {bufferization.writable = true})
// CHECK: %[[R:[a-z0-9]+]] = scf.for {{.*}} iter_args(%{{.*}} = %[[C]])
// CHECK-NOT: materialize_in_destination
// CHECK: return %[[R]]
// BUF-LABEL: func.func @accumulate
// BUF-NOT: memref.alloc
// BUF: return %{{.*}} : memref<?xf32>
func.func @accumulate(%n: index, %c: tensor<?xf32>) -> tensor<?xf32>
    attributes {sparse_iter.destinations = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%t = %c) -> (tensor<?xf32>) {
    %v = tensor.extract %t[%i] : tensor<?xf32>
    %s = arith.addf %v, %one : f32
    %w = tensor.insert %s into %t[%i] : tensor<?xf32>
    scf.yield %w : tensor<?xf32>
  }
  %m = bufferization.materialize_in_destination %r in %c : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %m : tensor<?xf32>
}

// -----

// Functions without the attribute are left as they are (their arguments stay
// read-only; their empty tensors stay).
// CHECK-LABEL: func.func @plain
// CHECK-SAME: {bufferization.writable = false}
// CHECK: tensor.empty
func.func @plain(%n: index, %x: tensor<?xf32>) -> tensor<?xf32> {
  %e = tensor.empty(%n) : tensor<?xf32>
  return %e : tensor<?xf32>
}
