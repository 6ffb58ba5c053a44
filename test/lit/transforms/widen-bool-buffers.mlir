// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-widen-bool-buffers | FileCheck %s --enable-var-scope

// The "filled" flags of the sparsifier's expanded access pattern: an i1
// buffer allocated, cleared, read and written in loops, passed to a helper.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[I:.*]]: index) -> i1
// CHECK: %[[B:.*]] = memref.load %[[M]][%[[I]]] : memref<?xi8>
// CHECK: %[[F:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK: return %[[F]] : i1
func.func private @helper(%m: memref<?xi1>, %i: index) -> i1 {
  %f = memref.load %m[%i] : memref<?xi1>
  return %f : i1
}

// CHECK-LABEL: func.func @expand
// CHECK: %[[M:.*]] = memref.alloc(%{{.*}}) : memref<?xi8>
// CHECK: %[[Z:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK: linalg.fill ins(%[[Z]] : i8) outs(%[[M]] : memref<?xi8>)
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[A:.*]] = %[[M]]) -> (memref<?xi8>)
// CHECK:   %[[T:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK:   memref.store %[[T]], %[[A]][%{{.*}}] : memref<?xi8>
// CHECK:   scf.yield %[[A]] : memref<?xi8>
// CHECK: call @helper(%[[R]], %{{.*}}) : (memref<?xi8>, index) -> i1
// CHECK: memref.dealloc %[[R]] : memref<?xi8>
func.func @expand(%n: index) -> i1 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %false = arith.constant false
  %true = arith.constant true
  %m = memref.alloc(%n) : memref<?xi1>
  linalg.fill ins(%false : i1) outs(%m : memref<?xi1>)
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%a = %m) -> (memref<?xi1>) {
    memref.store %true, %a[%i] : memref<?xi1>
    scf.yield %a : memref<?xi1>
  }
  %f = func.call @helper(%r, %c0) : (memref<?xi1>, index) -> i1
  memref.dealloc %r : memref<?xi1>
  return %f : i1
}

// -----

// Vector accesses: stored values and paddings are extended, what is read is
// truncated, masks stay i1.
// CHECK-LABEL: func.func @vectors
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[V:.*]]: vector<4xi1>, %[[K:.*]]: vector<4xi1>)
// CHECK: %[[W:.*]] = arith.extui %[[V]] : vector<4xi1> to vector<4xi8>
// CHECK: vector.store %[[W]], %[[M]][%{{.*}}] : memref<?xi8>, vector<4xi8>
// CHECK: %[[L:.*]] = vector.load %[[M]][%{{.*}}] : memref<?xi8>, vector<4xi8>
// CHECK: %[[LT:.*]] = arith.trunci %[[L]] : vector<4xi8> to vector<4xi1>
// CHECK: %[[P:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK: %[[R:.*]] = vector.transfer_read %[[M]][%{{.*}}], %[[P]], %[[K]] : memref<?xi8>, vector<4xi8>
// CHECK: %[[RT:.*]] = arith.trunci %[[R]] : vector<4xi8> to vector<4xi1>
// CHECK: %[[PT:.*]] = arith.extui %[[LT]] : vector<4xi1> to vector<4xi8>
// CHECK: %[[G:.*]] = vector.maskedload %[[M]][%{{.*}}], %[[K]], %[[PT]] : memref<?xi8>, vector<4xi1>, vector<4xi8> into vector<4xi8>
// CHECK: %[[GT:.*]] = arith.trunci %[[G]] : vector<4xi8> to vector<4xi1>
// CHECK: arith.ori %[[RT]], %[[GT]] : vector<4xi1>
func.func @vectors(%m: memref<?xi1>, %v: vector<4xi1>, %mask: vector<4xi1>) -> vector<4xi1> {
  %c0 = arith.constant 0 : index
  %false = arith.constant false
  vector.store %v, %m[%c0] : memref<?xi1>, vector<4xi1>
  %l = vector.load %m[%c0] : memref<?xi1>, vector<4xi1>
  %r = vector.transfer_read %m[%c0], %false, %mask : memref<?xi1>, vector<4xi1>
  %g = vector.maskedload %m[%c0], %mask, %l : memref<?xi1>, vector<4xi1>, vector<4xi1> into vector<4xi1>
  %o = arith.ori %r, %g : vector<4xi1>
  return %o : vector<4xi1>
}

// -----

// A bool constant of the program (a static buffer from a global): the global
// becomes bytes with the same values.
// CHECK: memref.global "private" constant @flags : memref<2x2xi8> = dense<{{\[}}[1, 0], [0, 1]]>
// CHECK-LABEL: func.func @globals
// CHECK: %[[G:.*]] = memref.get_global @flags : memref<2x2xi8>
// CHECK: %[[B:.*]] = memref.load %[[G]][%{{.*}}, %{{.*}}] : memref<2x2xi8>
// CHECK: %[[T:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<4xi8>
memref.global "private" constant @flags : memref<2x2xi1> = dense<[[true, false], [false, true]]>
func.func @globals(%i: index) -> i1 {
  %c0 = arith.constant 0 : index
  %g = memref.get_global @flags : memref<2x2xi1>
  %b = memref.load %g[%i, %i] : memref<2x2xi1>
  %s = memref.alloc() : memref<4xi1>
  memref.store %b, %s[%c0] : memref<4xi1>
  memref.dealloc %s : memref<4xi1>
  return %b : i1
}

// -----

// A sparse<...> bool constant (arith.constant sparse<...> : tensor<5x5xi1>, a
// mask, bufferized): the global becomes a sparse<...> of bytes, splat or not.
// CHECK: memref.global "private" constant @mask : memref<3x3xi8> = sparse<{{\[}}[0, 0], [1, 2], [2, 1]], [1, 0, 1]>
// CHECK: memref.global "private" constant @diagonal : memref<3x3xi8> = sparse<{{\[}}[0, 0], [1, 1]], 1>
// CHECK-LABEL: func.func @sparse_globals
// CHECK: memref.get_global @mask : memref<3x3xi8>
// CHECK: memref.get_global @diagonal : memref<3x3xi8>
memref.global "private" constant @mask : memref<3x3xi1> = sparse<[[0, 0], [1, 2], [2, 1]], [true, false, true]>
memref.global "private" constant @diagonal : memref<3x3xi1> = sparse<[[0, 0], [1, 1]], true>
func.func @sparse_globals(%i: index) -> i1 {
  %c0 = arith.constant 0 : index
  %g = memref.get_global @mask : memref<3x3xi1>
  %h = memref.get_global @diagonal : memref<3x3xi1>
  %a = memref.load %g[%i, %i] : memref<3x3xi1>
  %b = memref.load %h[%i, %i] : memref<3x3xi1>
  %s = memref.alloc() : memref<2xi1>
  memref.store %a, %s[%c0] : memref<2xi1>
  memref.store %b, %s[%i] : memref<2xi1>
  memref.dealloc %s : memref<2xi1>
  return %a : i1
}

// -----

// An i1 buffer only read by an op the pass does not rewrite (and nothing
// stores to an i1 buffer): nothing changes.
// CHECK-LABEL: func.func @negative_prefetch
// CHECK: memref.alloc(%{{.*}}) : memref<?xi1>
// CHECK: memref.prefetch %{{.*}} : memref<?xi1>
// CHECK: memref.load %{{.*}} : memref<?xi1>
func.func @negative_prefetch(%n: index) -> i1 {
  %c0 = arith.constant 0 : index
  %m = memref.alloc(%n) : memref<?xi1>
  memref.prefetch %m[%c0], read, locality<3>, data : memref<?xi1>
  %v = memref.load %m[%c0] : memref<?xi1>
  return %v : i1
}
