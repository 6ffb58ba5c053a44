// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-codegen)' | FileCheck %s

// Bufferized code in, LLVM dialect out: the marked loop becomes an OpenMP
// worksharing loop.
// CHECK-LABEL: llvm.func @fill
// CHECK: omp.parallel
// CHECK: omp.wsloop
func.func @fill(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %m step %c1 {
    memref.store %one, %y[%i] : memref<?xf32>
  } {sparse_iter.parallel}
  return
}
