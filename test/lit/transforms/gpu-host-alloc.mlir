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
// CHECK: %[[W:.*]] = gpu.wait async
// CHECK: %[[D:.*]] = gpu.dealloc async [%[[W]]] %[[T]] : memref<16xi32>
// CHECK: gpu.wait [%[[D]]]
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

// -----

// A kernel in a private function (a tensor-core kernel) writes the buffers its
// caller allocated and filled: the caller's allocations are managed memory too.
// A function that only allocates what a launching function gets, likewise.
// CHECK-LABEL: func.func @caller_of_a_kernel
// CHECK: %[[INIT:.*]] = gpu.alloc host_shared (%{{.*}}) : memref<?xf32>
// CHECK: %[[OUT:.*]] = gpu.alloc host_shared (%{{.*}}) : memref<?xf32>
// CHECK: call @kernel(%[[INIT]], %[[OUT]])
// CHECK: gpu.dealloc async [%{{.*}}] %[[INIT]]
// CHECK-NOT: memref.alloc
// CHECK-LABEL: func.func private @kernel
// CHECK-LABEL: func.func private @scratch
// CHECK: gpu.alloc host_shared
// CHECK-LABEL: func.func @unrelated
// CHECK: memref.alloc
func.func @caller_of_a_kernel(%n: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %init = memref.alloc(%n) : memref<?xf32>
  memref.store %zero, %init[%c0] : memref<?xf32>
  %out = memref.alloc(%n) : memref<?xf32>
  call @kernel(%init, %out) : (memref<?xf32>, memref<?xf32>) -> ()
  memref.dealloc %init : memref<?xf32>
  return %out : memref<?xf32>
}
func.func private @kernel(%init: memref<?xf32>, %out: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %t = call @scratch() : () -> memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %init[%tx] : memref<?xf32>
    memref.store %v, %out[%tx] : memref<?xf32>
    memref.store %v, %t[%tx] : memref<4xf32>
    gpu.terminator
  }
  return
}
func.func private @scratch() -> memref<4xf32> {
  %t = memref.alloc() : memref<4xf32>
  return %t : memref<4xf32>
}
func.func @unrelated(%n: index) {
  %a = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}

// -----

// An outs operand copied into the result by the host code: gpu.memcpy (the
// caller's array may be GPU memory, which host code cannot read). A strided
// copy, which gpu.memcpy does not take, stays.
// CHECK-LABEL: func.func @outs_copied
// CHECK-SAME: (%[[Y:.*]]: memref<?xf32>, %[[S:.*]]: memref<4xf32, strided<[2]>>)
// CHECK: %[[R:.*]] = gpu.alloc host_shared
// CHECK: %[[W:.*]] = gpu.wait async
// CHECK: %[[C:.*]] = gpu.memcpy async [%[[W]]] %[[R]], %[[Y]] : memref<?xf32>, memref<?xf32>
// CHECK: gpu.wait [%[[C]]]
// CHECK: memref.copy %[[S]]
// CHECK: gpu.launch
func.func @outs_copied(%y: memref<?xf32>, %s: memref<4xf32, strided<[2]>>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %y, %c0 : memref<?xf32>
  %r = memref.alloc(%n) : memref<?xf32>
  memref.copy %y, %r : memref<?xf32> to memref<?xf32>
  %t = memref.alloc() : memref<4xf32>
  memref.copy %s, %t : memref<4xf32, strided<[2]>> to memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
    %v = memref.load %t[%c0] : memref<4xf32>
    memref.store %v, %r[%tx] : memref<?xf32>
    gpu.terminator
  }
  return %r : memref<?xf32>
}

// -----

// An unranked copy, which gpu.memcpy does not take, stays (no crash).
// CHECK-LABEL: func.func @unranked_copy
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<*xf32> to memref<*xf32>
func.func @unranked_copy(%a: memref<*xf32>, %b: memref<*xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  memref.copy %a, %b : memref<*xf32> to memref<*xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
    gpu.terminator
  }
  return
}
