// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-forward-returned-arguments | FileCheck %s

// SDDMM's host code after bufferization: the result's positions and
// coordinates are fresh copies of the argument's, which only kernels read.
// The arguments are returned instead; the copies and their allocations go.
// CHECK-LABEL: func.func @structure_of_the_input
// CHECK-SAME: (%[[POS:.*]]: memref<?xi32>, %[[CRD:.*]]: memref<?xi32>, %[[VAL:.*]]: memref<?xf32>)
// CHECK-NOT: memref.copy
// CHECK: %[[NEW:.*]] = memref.alloc
// CHECK: gpu.launch
// CHECK-NOT: memref.copy
// CHECK: return %[[POS]], %[[CRD]], %[[NEW]]
func.func @structure_of_the_input(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>)
    -> (memref<?xi32>, memref<?xi32>, memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %val, %c0 : memref<?xf32>
  %out = memref.alloc(%n) : memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %val[%bx] : memref<?xf32>
    %p = memref.load %pos[%bx] : memref<?xi32>
    memref.store %v, %out[%bx] : memref<?xf32>
    gpu.terminator
  }
  %d0 = memref.dim %pos, %c0 : memref<?xi32>
  %a0 = memref.alloc(%d0) : memref<?xi32>
  memref.copy %pos, %a0 : memref<?xi32> to memref<?xi32>
  %d1 = memref.dim %crd, %c0 : memref<?xi32>
  %a1 = memref.alloc(%d1) : memref<?xi32>
  memref.copy %crd, %a1 : memref<?xi32> to memref<?xi32>
  return %a0, %a1, %out : memref<?xi32>, memref<?xi32>, memref<?xf32>
}

// -----

// Left as they are: an argument the function writes (through a view too), a
// copy that is also read or written after, and a copy of part of an argument.
// CHECK-LABEL: func.func @negative_written
// CHECK: memref.copy %{{.*}}, %[[A:.*]] :
// CHECK: return %[[A]]
// CHECK-LABEL: func.func @negative_written_through_a_view
// CHECK: memref.copy
// CHECK-LABEL: func.func @negative_copy_used
// CHECK: memref.copy
// CHECK-LABEL: func.func @negative_part
// CHECK: memref.copy
func.func @negative_written(%x: memref<?xf32>, %v: f32) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %d = memref.dim %x, %c0 : memref<?xf32>
  %a = memref.alloc(%d) : memref<?xf32>
  memref.copy %x, %a : memref<?xf32> to memref<?xf32>
  memref.store %v, %x[%c0] : memref<?xf32>
  return %a : memref<?xf32>
}
func.func @negative_written_through_a_view(%x: memref<?xf32>, %v: f32) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %d = memref.dim %x, %c0 : memref<?xf32>
  %a = memref.alloc(%d) : memref<?xf32>
  memref.copy %x, %a : memref<?xf32> to memref<?xf32>
  %view = memref.cast %x : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
  memref.store %v, %view[%c0] : memref<?xf32, strided<[1], offset: ?>>
  return %a : memref<?xf32>
}
func.func @negative_copy_used(%x: memref<?xf32>, %v: f32) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %d = memref.dim %x, %c0 : memref<?xf32>
  %a = memref.alloc(%d) : memref<?xf32>
  memref.copy %x, %a : memref<?xf32> to memref<?xf32>
  memref.store %v, %a[%c0] : memref<?xf32>
  return %a : memref<?xf32>
}
func.func @negative_part(%x: memref<?xf32>) -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  %part = memref.subview %x[0] [4] [1] : memref<?xf32> to memref<4xf32, strided<[1]>>
  memref.copy %part, %a : memref<4xf32, strided<[1]>> to memref<4xf32>
  return %a : memref<4xf32>
}
