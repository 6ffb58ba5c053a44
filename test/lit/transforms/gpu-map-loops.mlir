// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-map-loops | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-map-loops='rows-per-block=256 column-lanes=64 rows-per-column-block=2' | FileCheck %s --check-prefix=SIZES

// SIZES-LABEL: func.func @rows
// SIZES: arith.constant 256 : index
// SIZES-LABEL: func.func @columns
// SIZES-DAG: arith.constant 64 : index
// SIZES-DAG: arith.constant 2 : index

// A row loop: one row per thread, 128 threads per block, a guard at the end.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// CHECK: %[[C128:.*]] = arith.constant 128 : index
// CHECK: %[[GRID:.*]] = arith.ceildivsi %{{.*}}, %[[C128]] : index
// CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[GRID]])
// CHECK: scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[C128]])
// CHECK: %[[ROW:.*]] = arith.addi %{{.*}}, %[[T]]
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[ROW]]
// CHECK: scf.if %[[IN]]
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: processor = thread_x
// CHECK: processor = block_x
func.func @rows(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    memref.store %one, %y[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// A row loop whose body is a loop over independent output columns (SpMM):
// columns on the lanes (thread_x, 32), rows on thread_y (4).
// CHECK-LABEL: func.func @columns
// CHECK-SAME: (%[[C:.*]]: memref<?x?xf32>, %[[B:.*]]: memref<?x?xf32>, %[[M:.*]]: index, %[[N:.*]]: index)
// CHECK: scf.parallel (%[[BJ:.*]], %[[BI:.*]]) =
// CHECK: scf.parallel (%[[TJ:.*]], %[[TI:.*]]) = (%{{.*}}, %{{.*}}) to (%[[C32:.*]], %[[C4:.*]])
// CHECK: %[[J:.*]] = arith.addi %{{.*}}, %[[TJ]]
// CHECK: %[[I:.*]] = arith.addi %{{.*}}, %[[TI]]
// CHECK: arith.andi
// CHECK: scf.if
// CHECK: memref.load %[[B]][%{{.*}}, %{{.*}}]
// CHECK: memref.store %{{.*}}, %[[C]][%{{.*}}, %{{.*}}]
// CHECK: processor = thread_x{{.*}}processor = thread_y
// CHECK: processor = block_x{{.*}}processor = block_y
func.func @columns(%c: memref<?x?xf32>, %b: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %j = %c0 to %n step %c1 {
      %v = memref.load %b[%i, %j] : memref<?x?xf32>
      %o = memref.load %c[%i, %j] : memref<?x?xf32>
      %s = arith.addf %v, %o : f32
      memref.store %s, %c[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Columns that are not independent (each iteration reads its left
// neighbour's output) stay a loop inside the row's thread.
// CHECK-LABEL: func.func @prefix
// CHECK: scf.parallel (%{{.*}}) =
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c128)
// CHECK: scf.for
func.func @prefix(%c: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %j = %c1 to %n step %c1 {
      %l = arith.subi %j, %c1 : index
      %v = memref.load %c[%i, %l] : memref<?x?xf32>
      memref.store %v, %c[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}
