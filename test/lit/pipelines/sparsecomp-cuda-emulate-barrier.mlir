// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cuda-emulate)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// Four threads each write t + 1, meet at a barrier, then read the mirror
// thread's value: (4 - t) + (t + 1) = 5 for every thread. Run one thread
// after the other without phases, thread 0 would read buf[3] before thread
// 3 wrote it.
// CHECK: ( 5, 5, 5, 5 )
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %zf = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<4xf32>
  %out = memref.alloc() : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %i = arith.index_cast %tx : index to i32
    %f = arith.sitofp %i : i32 to f32
    %one = arith.constant 1.0 : f32
    %v = arith.addf %f, %one : f32
    memref.store %v, %buf[%tx] : memref<4xf32>
    gpu.barrier
    %mirror = arith.subi %c3, %tx : index
    %w = memref.load %buf[%mirror] : memref<4xf32>
    %s = arith.addf %w, %v : f32
    memref.store %s, %out[%tx] : memref<4xf32>
    gpu.terminator
  }
  %r = vector.transfer_read %out[%c0], %zf {in_bounds = [true]} : memref<4xf32>, vector<4xf32>
  vector.print %r : vector<4xf32>
  return
}
