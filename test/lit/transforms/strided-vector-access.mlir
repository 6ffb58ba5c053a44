// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-strided-vector-access | FileCheck %s --enable-var-scope

// The sparsifier's vectorized read of array-of-structs COO coordinates: a
// masked load of a strided view becomes a transfer (element by element).
// CHECK-LABEL: func.func @aos_coordinates
// CHECK-SAME: (%[[M:.*]]: memref<?xindex, strided<[?], offset: ?>>, %[[I:.*]]: index, %[[K:.*]]: vector<8xi1>, %[[P:.*]]: vector<8xindex>)
// CHECK: %[[Z:.*]] = arith.constant 0 : index
// CHECK: %[[R:.*]] = vector.transfer_read %[[M]][%[[I]]], %[[Z]], %[[K]] : memref<?xindex, strided<[?], offset: ?>>, vector<8xindex>
// CHECK: %[[S:.*]] = arith.select %[[K]], %[[R]], %[[P]] : vector<8xi1>, vector<8xindex>
// CHECK: vector.transfer_write %[[S]], %[[M]][%[[I]]], %[[K]] : vector<8xindex>, memref<?xindex, strided<[?], offset: ?>>
// CHECK: return %[[S]]
func.func @aos_coordinates(%m: memref<?xindex, strided<[?], offset: ?>>, %i: index, %mask: vector<8xi1>, %p: vector<8xindex>) -> vector<8xindex> {
  %v = vector.maskedload %m[%i], %mask, %p : memref<?xindex, strided<[?], offset: ?>>, vector<8xi1>, vector<8xindex> into vector<8xindex>
  vector.maskedstore %m[%i], %mask, %v : memref<?xindex, strided<[?], offset: ?>>, vector<8xi1>, vector<8xindex>
  return %v : vector<8xindex>
}

// -----

// A float buffer with a static stride of 2.
// CHECK-LABEL: func.func @static_stride
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: vector.transfer_read %{{.*}}[%{{.*}}], %[[Z]], %{{.*}} : memref<?xf32, strided<[2]>>, vector<4xf32>
// CHECK-NOT: vector.maskedload
func.func @static_stride(%m: memref<?xf32, strided<[2]>>, %i: index, %mask: vector<4xi1>, %p: vector<4xf32>) -> vector<4xf32> {
  %v = vector.maskedload %m[%i], %mask, %p : memref<?xf32, strided<[2]>>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  return %v : vector<4xf32>
}

// -----

// Unit-stride buffers (plain or 2-D row-major) keep their masked accesses.
// CHECK-LABEL: func.func @negative_unit_stride
// CHECK: vector.maskedload %{{.*}} : memref<?xf32>
// CHECK: vector.maskedstore %{{.*}} : memref<?x4xf32>
func.func @negative_unit_stride(%m: memref<?xf32>, %n: memref<?x4xf32>, %i: index, %mask: vector<4xi1>, %p: vector<4xf32>) {
  %v = vector.maskedload %m[%i], %mask, %p : memref<?xf32>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  vector.maskedstore %n[%i, %i], %mask, %v : memref<?x4xf32>, vector<4xi1>, vector<4xf32>
  return
}
