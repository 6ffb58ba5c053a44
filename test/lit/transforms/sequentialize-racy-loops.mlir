// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-sequentialize-racy-loops | FileCheck %s --enable-var-scope

// The sparsifier's CSC SpMV: the parallel loop over columns scatters into y at
// the row coordinates it reads, so two iterations may add to one element.
// CHECK-LABEL: func.func @csc_scatter
// CHECK-SAME: (%[[N:.*]]: index, %[[POS:.*]]: memref<?xindex>, %[[CRD:.*]]: memref<?xindex>, %[[V:.*]]: memref<?xf64>, %[[Y:.*]]: memref<?xf64>)
// CHECK-NOT: scf.parallel
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %[[N]] step
// CHECK: memref.load %[[POS]][%[[J]]]
// CHECK: scf.for %[[P:.*]] =
// CHECK: %[[I:.*]] = memref.load %[[CRD]][%[[P]]]
// CHECK: memref.store %{{.*}}, %[[Y]][%[[I]]]
// CHECK-NOT: scf.reduce
func.func @csc_scatter(%n: index, %pos: memref<?xindex>, %crd: memref<?xindex>,
                       %v: memref<?xf64>, %y: memref<?xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%j) = (%c0) to (%n) step (%c1) {
    %lo = memref.load %pos[%j] : memref<?xindex>
    %j1 = arith.addi %j, %c1 : index
    %hi = memref.load %pos[%j1] : memref<?xindex>
    scf.for %p = %lo to %hi step %c1 {
      %i = memref.load %crd[%p] : memref<?xindex>
      %old = memref.load %y[%i] : memref<?xf64>
      %a = memref.load %v[%p] : memref<?xf64>
      %s = arith.addf %old, %a : f64
      memref.store %s, %y[%i] : memref<?xf64>
    }
    scf.reduce
  }
  return
}

// -----

// Two dimensions: both become loops, in order.
// CHECK-LABEL: func.func @two_dims
// CHECK: scf.for %[[I:.*]] =
// CHECK-NEXT: scf.for %[[J:.*]] =
// CHECK: memref.store %[[J]], %{{.*}}[%[[I]]]
func.func @two_dims(%n: index, %y: memref<?xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %n) step (%c1, %c1) {
    memref.store %j, %y[%i] : memref<?xindex>
    scf.reduce
  }
  return
}

// -----

// CSR SpMV: every iteration writes its own row (the induction variable is an
// index of the store), and vector writes of a row of C: parallel still.
// CHECK-LABEL: func.func @negative_own_row
// CHECK: scf.parallel
func.func @negative_own_row(%n: index, %y: memref<?xf64>, %c: memref<?x?xf32>,
                            %x: vector<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f64
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %f, %y[%i] : memref<?xf64>
    vector.transfer_write %x, %c[%i, %c0] : vector<8xf32>, memref<?x?xf32>
    scf.reduce
  }
  return
}

// -----

// Writes into a buffer of the iteration's own, through a view whose offset is
// the induction variable, and atomic updates: parallel still.
// CHECK-LABEL: func.func @negative_private_view_atomic
// CHECK: scf.parallel
func.func @negative_private_view_atomic(%n: index, %m: memref<?x?xf64>, %y: memref<?xf64>,
                                        %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f64
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %s = memref.alloca() : memref<4xf64>
    memref.store %f, %s[%k] : memref<4xf64>
    %row = memref.subview %m[%i, 0] [1, 4] [1, 1] : memref<?x?xf64> to memref<4xf64, strided<[1], offset: ?>>
    memref.store %f, %row[%k] : memref<4xf64, strided<[1], offset: ?>>
    %r = memref.atomic_rmw addf %f, %y[%k] : (f64, memref<?xf64>) -> f64
    scf.reduce
  }
  return
}
