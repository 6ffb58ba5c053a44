// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-horizontal-fusion | FileCheck %s --enable-var-scope

#bx = #gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>
#by = #gpu.loop_dim_map<processor = block_y, map = (d0) -> (d0), bound = (d0) -> (d0)>
#tx = #gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>
#ty = #gpu.loop_dim_map<processor = thread_y, map = (d0) -> (d0), bound = (d0) -> (d0)>

// Two parts of one op with disjoint rows: a 128-thread row per thread launch and
// a (32 x 4) launch with a 2-D grid become one launch over both grids end to
// end; the second part's block and thread ids are rebuilt from the fused ones
// (x fastest), and the load of its grid size (an argument never written) moves
// above.
// CHECK-LABEL: func.func @two_parts
// CHECK-SAME: (%[[POS:.*]]: memref<?xindex>, %[[Y:.*]]: memref<?xf32>, %[[N0:.*]]: index, %[[GX:.*]]: index)
// CHECK: %[[GY:.*]] = memref.load %[[POS]]
// CHECK: %[[SECOND:.*]] = arith.muli %[[GX]], %[[GY]]
// CHECK: %[[START1:.*]] = arith.addi %{{.*}}, %[[N0]]
// CHECK: %[[END:.*]] = arith.addi %[[START1]], %[[SECOND]]
// CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[END]])
// CHECK: scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%c128{{[_0-9]*}})
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: %[[LOCAL:.*]] = arith.subi %[[B]], %[[START1]]
// CHECK: %[[BX:.*]] = arith.remsi %[[LOCAL]], %[[GX]]
// CHECK: %[[BY:.*]] = arith.divsi %[[LOCAL]], %[[GX]]
// CHECK: %[[TX:.*]] = arith.remsi %[[T]], %c32
// CHECK: %[[TY:.*]] = arith.divsi %[[T]], %c32
// CHECK: arith.addi %[[BX]], %[[TX]]
// CHECK: arith.addi %[[BY]], %[[TY]]
// CHECK: mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x
// CHECK-NOT: scf.parallel
func.func @two_parts(%pos: memref<?xindex>, %y: memref<?xf32>, %n0: index, %gx: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%b) = (%c0) to (%n0) step (%c1) {
    scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
      %i = arith.addi %b, %t : index
      memref.store %f, %y[%i] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx]}
    scf.reduce
  } {mapping = [#bx], sparse_iter.parts_group = 3 : i64, sparse_iter.disjoint_rows}
  %gy = memref.load %pos[%c0] : memref<?xindex>
  scf.parallel (%bx, %by) = (%c0, %c0) to (%gx, %gy) step (%c1, %c1) {
    scf.parallel (%tx, %ty) = (%c0, %c0) to (%c32, %c4) step (%c1, %c1) {
      %i = arith.addi %bx, %tx : index
      %j = arith.addi %by, %ty : index
      %k = arith.addi %i, %j : index
      memref.store %f, %y[%k] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx, #ty]}
    scf.reduce
  } {mapping = [#bx, #by], sparse_iter.parts_group = 3 : i64, sparse_iter.disjoint_rows}
  return
}

// -----

#bx = #gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>
#tx = #gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>

// Parts whose rows are not disjoint (no sparse_iter.disjoint_rows: several
// column partitions) would race on the output: they stay separate launches.
// So do launches of different groups, and launches with a write between them.
// CHECK-LABEL: func.func @not_fused
// CHECK-COUNT-10: scf.parallel
// CHECK-NOT: scf.parallel
func.func @not_fused(%y: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%b) = (%c0) to (%n) step (%c1) {
    scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
      memref.store %f, %y[%t] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx]}
    scf.reduce
  } {mapping = [#bx], sparse_iter.parts_group = 1 : i64}
  scf.parallel (%b) = (%c0) to (%n) step (%c1) {
    scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
      memref.store %f, %y[%t] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx]}
    scf.reduce
  } {mapping = [#bx], sparse_iter.parts_group = 1 : i64}
  scf.parallel (%b) = (%c0) to (%n) step (%c1) {
    scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
      memref.store %f, %y[%t] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx]}
    scf.reduce
  } {mapping = [#bx], sparse_iter.parts_group = 2 : i64, sparse_iter.disjoint_rows}
  scf.parallel (%b) = (%c0) to (%n) step (%c1) {
    scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
      memref.store %f, %y[%t] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx]}
    scf.reduce
  } {mapping = [#bx], sparse_iter.parts_group = 3 : i64, sparse_iter.disjoint_rows}
  memref.store %f, %y[%c0] : memref<?xf32>
  scf.parallel (%b) = (%c0) to (%n) step (%c1) {
    scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
      memref.store %f, %y[%t] : memref<?xf32>
      scf.reduce
    } {mapping = [#tx]}
    scf.reduce
  } {mapping = [#bx], sparse_iter.parts_group = 3 : i64, sparse_iter.disjoint_rows}
  return
}
