// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cuda-emulate)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// One warp multiplies a 16x8 by an 8x8 matrix with mma.sync m16n8k8 (tf32).
// Each lane loads its fragment elements where the PTX ISA puts them
// ("Matrix Fragments for mma.m16n8k8", .tf32: a0 (g, t), a1 (g+8, t),
// a2 (g, t+4), a3 (g+8, t+4); b0 (t, g), b1 (t+4, g); c0/c1 (g, 2t, 2t+1),
// c2/c3 (g+8, ...), with g = lane / 4 and t = lane % 4), written out here
// independently of sparsecomp's table. The emulation's D must be A B:
// rows 0 and 15 of (8r + k) (k - n), computed with numpy.
// CHECK: ( 140, 112, 84, 56, 28, 0, -28, -56 )
// CHECK-NEXT: ( 3500, 2512, 1524, 536, -452, -1440, -2428, -3416 )
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %zf = arith.constant 0.0 : f32
  %A = memref.alloc() : memref<16x8xf32>
  %B = memref.alloc() : memref<8x8xf32>
  %D = memref.alloc() : memref<16x8xf32>
  // A[r][k] = 8r + k, B[k][n] = k - n: small integers, exact in tf32.
  scf.for %r = %c0 to %c16 step %c1 {
    scf.for %k = %c0 to %c8 step %c1 {
      %v = arith.muli %r, %c8 : index
      %w = arith.addi %v, %k : index
      %i = arith.index_cast %w : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %A[%r, %k] : memref<16x8xf32>
    }
  }
  scf.for %k = %c0 to %c8 step %c1 {
    scf.for %n = %c0 to %c8 step %c1 {
      %w = arith.subi %k, %n : index
      %i = arith.index_cast %w : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %B[%k, %n] : memref<8x8xf32>
    }
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %g = arith.shrui %tx, %c2 : index
    %t = arith.andi %tx, %c3 : index
    %g8 = arith.addi %g, %c8 : index
    %t4 = arith.addi %t, %c4 : index
    %a0 = memref.load %A[%g, %t] : memref<16x8xf32>
    %a1 = memref.load %A[%g8, %t] : memref<16x8xf32>
    %a2 = memref.load %A[%g, %t4] : memref<16x8xf32>
    %a3 = memref.load %A[%g8, %t4] : memref<16x8xf32>
    %b0 = memref.load %B[%t, %g] : memref<8x8xf32>
    %b1 = memref.load %B[%t4, %g] : memref<8x8xf32>
    %a = vector.from_elements %a0, %a1, %a2, %a3 : vector<4x1xf32>
    %b = vector.from_elements %b0, %b1 : vector<2x1xf32>
    %c = arith.constant dense<0.0> : vector<2x2xf32>
    %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 8], tf32Enabled}
        : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
    %col = arith.muli %t, %c2 : index
    %col1 = arith.addi %col, %c1 : index
    %d0 = vector.extract %d[0, 0] : f32 from vector<2x2xf32>
    %d1 = vector.extract %d[0, 1] : f32 from vector<2x2xf32>
    %d2 = vector.extract %d[1, 0] : f32 from vector<2x2xf32>
    %d3 = vector.extract %d[1, 1] : f32 from vector<2x2xf32>
    memref.store %d0, %D[%g, %col] : memref<16x8xf32>
    memref.store %d1, %D[%g, %col1] : memref<16x8xf32>
    memref.store %d2, %D[%g8, %col] : memref<16x8xf32>
    memref.store %d3, %D[%g8, %col1] : memref<16x8xf32>
    gpu.terminator
  }
  %r0 = vector.transfer_read %D[%c0, %c0], %zf {in_bounds = [true]} : memref<16x8xf32>, vector<8xf32>
  vector.print %r0 : vector<8xf32>
  %r15 = vector.transfer_read %D[%c15, %c0], %zf {in_bounds = [true]} : memref<16x8xf32>, vector<8xf32>
  vector.print %r15 : vector<8xf32>
  return
}
