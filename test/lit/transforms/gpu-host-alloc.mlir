// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-host-alloc | FileCheck %s --enable-var-scope

// A result the kernel writes, allocated by the host code: managed memory.
// Allocations inside the launch and stack scratch stay.
// CHECK-LABEL: func.func @result_written_by_a_kernel
// CHECK-SAME: (%[[M:.*]]: index, %[[N:.*]]: index)
// CHECK: %[[C:.*]] = gpu.alloc host_shared (%[[M]], %[[N]]) : memref<?x?xf32>
// CHECK: %[[S:.*]] = memref.alloca() : memref<4xf32>
// CHECK: gpu.launch
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: memref.store %{{.*}}, %[[C]]
// CHECK: return %[[C]]
func.func @result_written_by_a_kernel(%m: index, %n: index) -> memref<?x?xf32> {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %f = arith.constant 1.0 : f32
  %C = memref.alloc(%m, %n) {alignment = 64 : i64} : memref<?x?xf32>
  %s = memref.alloca() : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %m, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
    %local = memref.alloc() : memref<8xf32>
    memref.store %f, %C[%bx, %tx] : memref<?x?xf32>
    gpu.terminator
  }
  return %C : memref<?x?xf32>
}

// -----

// A temporary freed by the host code: gpu.dealloc.
// CHECK-LABEL: func.func @temporary
// CHECK: %[[T:.*]] = gpu.alloc host_shared () : memref<16xi32>
// CHECK: gpu.launch
// CHECK: gpu.dealloc %[[T]] : memref<16xi32>
// CHECK-NOT: memref.dealloc
func.func @temporary(%out: memref<16xi32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %t = memref.alloc() : memref<16xi32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %v = memref.load %t[%tx] : memref<16xi32>
    memref.store %v, %out[%tx] : memref<16xi32>
    gpu.terminator
  }
  memref.dealloc %t : memref<16xi32>
  return
}

// -----

// Functions without a launch (host-only code) keep malloc.
// CHECK-LABEL: func.func @host_only
// CHECK: memref.alloc
// CHECK: memref.dealloc
// CHECK-NOT: gpu.alloc
func.func @host_only(%n: index) {
  %a = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}
