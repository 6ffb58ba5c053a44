// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cuda-emulate)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// Two warps (64 threads in one block). Each lane holds lane + 1; a xor
// butterfly (offsets 16, 8, 4, 2, 1) leaves every lane of a warp with its
// warp's sum: 1 + ... + 32 = 528 and 33 + ... + 64 = 1552. Then `idx 5`
// gives every lane lane 5's original value (6 and 38), and `down 1` its
// right neighbour's, the last lane keeping its own (invalid source).
// CHECK: ( 528, 528, 528, 1552, 1552, 1552 )
// CHECK-NEXT: ( 6, 6, 38, 38 )
// CHECK-NEXT: ( 2, 32, 34, 64 )
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  %c33 = arith.constant 33 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %width = arith.constant 32 : i32
  %sum = memref.alloc() : memref<64xf32>
  %five = memref.alloc() : memref<64xf32>
  %next = memref.alloc() : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = arith.index_cast %tx : index to i32
    %f = arith.sitofp %i : i32 to f32
    %one = arith.constant 1.0 : f32
    %v = arith.addf %f, %one : f32
    %o16 = arith.constant 16 : i32
    %o8 = arith.constant 8 : i32
    %o4 = arith.constant 4 : i32
    %o2 = arith.constant 2 : i32
    %o1 = arith.constant 1 : i32
    %s16, %p16 = gpu.shuffle xor %v, %o16, %width : f32
    %a16 = arith.addf %v, %s16 : f32
    %s8, %p8 = gpu.shuffle xor %a16, %o8, %width : f32
    %a8 = arith.addf %a16, %s8 : f32
    %s4, %p4 = gpu.shuffle xor %a8, %o4, %width : f32
    %a4 = arith.addf %a8, %s4 : f32
    %s2, %p2 = gpu.shuffle xor %a4, %o2, %width : f32
    %a2 = arith.addf %a4, %s2 : f32
    %s1, %p1 = gpu.shuffle xor %a2, %o1, %width : f32
    %a1 = arith.addf %a2, %s1 : f32
    memref.store %a1, %sum[%tx] : memref<64xf32>
    %o5 = arith.constant 5 : i32
    %b, %pb = gpu.shuffle idx %v, %o5, %width : f32
    memref.store %b, %five[%tx] : memref<64xf32>
    %d, %pd = gpu.shuffle down %v, %o1, %width : f32
    memref.store %d, %next[%tx] : memref<64xf32>
    gpu.terminator
  }
  %s0 = memref.load %sum[%c0] : memref<64xf32>
  %s1 = memref.load %sum[%c31] : memref<64xf32>
  %s2 = memref.load %sum[%c32] : memref<64xf32>
  %s3 = memref.load %sum[%c33] : memref<64xf32>
  %s4 = memref.load %sum[%c63] : memref<64xf32>
  %s5 = memref.load %sum[%c1] : memref<64xf32>
  %sv = vector.from_elements %s0, %s5, %s1, %s2, %s3, %s4 : vector<6xf32>
  vector.print %sv : vector<6xf32>
  %f0 = memref.load %five[%c0] : memref<64xf32>
  %f1 = memref.load %five[%c31] : memref<64xf32>
  %f2 = memref.load %five[%c32] : memref<64xf32>
  %f3 = memref.load %five[%c63] : memref<64xf32>
  %fv = vector.from_elements %f0, %f1, %f2, %f3 : vector<4xf32>
  vector.print %fv : vector<4xf32>
  %n0 = memref.load %next[%c0] : memref<64xf32>
  %n1 = memref.load %next[%c31] : memref<64xf32>
  %n2 = memref.load %next[%c32] : memref<64xf32>
  %n3 = memref.load %next[%c63] : memref<64xf32>
  %nv = vector.from_elements %n0, %n1, %n2, %n3 : vector<4xf32>
  vector.print %nv : vector<4xf32>
  return
}
