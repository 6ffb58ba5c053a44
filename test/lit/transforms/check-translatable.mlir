// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-check-translatable | FileCheck %s --enable-var-scope

// LLVM dialect and OpenMP ops are what translation to LLVM IR takes: the
// module comes out unchanged.
// CHECK-LABEL: llvm.func @all_llvm
// CHECK-SAME: (%[[P:.*]]: !llvm.ptr, %[[N:.*]]: i64)
// CHECK: omp.parallel {
// CHECK: llvm.store %[[N]], %[[P]] : i64, !llvm.ptr
// CHECK: omp.terminator
// CHECK: llvm.return
llvm.func @all_llvm(%p: !llvm.ptr, %n: i64) {
  omp.parallel {
    llvm.store %n, %p : i64, !llvm.ptr
    omp.terminator
  }
  llvm.return
}
