// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cuda-schedule)' | FileCheck %s

// The marked row loop becomes one gpu.launch: ceil(m / 128) blocks of 128
// threads, one row per thread, and a guard for the last block's extra threads.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: %[[M:[^:]*]]: index) -> memref<?xf32>
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[GRID:.*]] = arith.ceildivsi %[[M]], %[[C128]]
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C128]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK: %[[BASE:.*]] = arith.muli %[[BX]], %[[C128]]
// CHECK: %[[ROW:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[ROW]], %[[M]]
// CHECK: scf.if %[[IN]]
// CHECK: gpu.terminator
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
