// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cuda-emulate)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// Shared memory, one tile per block: each of a block's 32 threads writes its
// global index into the tile, meets the others at a barrier, then reads its
// mirror lane's entry. Block 0 gives 31 .. 0, block 1 63 .. 32. Per-thread
// tiles would leave the mirror's entry unwritten; running the threads without
// the barrier's phases would read it before it is written.
// CHECK: ( 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32 )
// The same with the tile allocated in the kernel body (memref.alloc in
// workgroup memory) and a second tile: sums of both mirrors.
// CHECK: ( 62, 60, 58
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  %zf = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%tile : memref<32xf32, #gpu.address_space<workgroup>>) {
    %b = arith.muli %bx, %c32 : index
    %g = arith.addi %b, %tx : index
    %i = arith.index_cast %g : index to i32
    %f = arith.sitofp %i : i32 to f32
    memref.store %f, %tile[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %mirror = arith.subi %c31, %tx : index
    %w = memref.load %tile[%mirror] : memref<32xf32, #gpu.address_space<workgroup>>
    memref.store %w, %out[%g] : memref<64xf32>
    gpu.terminator
  }
  %r = vector.transfer_read %out[%c0], %zf {in_bounds = [true]} : memref<64xf32>, vector<64xf32>
  vector.print %r : vector<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %t1 = memref.alloc() : memref<32xf32, #gpu.address_space<workgroup>>
    %t2 = memref.alloc() : memref<32xf32, #gpu.address_space<workgroup>>
    %b = arith.muli %bx, %c32 : index
    %g = arith.addi %b, %tx : index
    %i = arith.index_cast %g : index to i32
    %f = arith.sitofp %i : i32 to f32
    memref.store %f, %t1[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    memref.store %f, %t2[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %mirror = arith.subi %c31, %tx : index
    %w1 = memref.load %t1[%mirror] : memref<32xf32, #gpu.address_space<workgroup>>
    %w2 = memref.load %t2[%mirror] : memref<32xf32, #gpu.address_space<workgroup>>
    %w = arith.addf %w1, %w2 : f32
    memref.store %w, %out[%g] : memref<64xf32>
    gpu.terminator
  }
  %r2 = vector.transfer_read %out[%c0], %zf {in_bounds = [true]} : memref<64xf32>, vector<64xf32>
  vector.print %r2 : vector<64xf32>
  return
}
