// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-cpu-function-targets | FileCheck %s

// Each function with a CPU target gets that target's ISA as LLVM sees it;
// vectors narrower than the features allow become a prefer-N-bit feature.
// Functions without a target are left to the module's -mattr.
module attributes {sparse_iter.targets = {
    narrow = #sparse_iter.cpu<x86_64, features = [sse4.2], vector_bits = 128, threads = 1>,
    wide = #sparse_iter.cpu<x86_64, features = [avx2, fma, avx512f], vector_bits = 256, threads = 2>,
    scalar = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 0, threads = 1>}} {
  // CHECK-LABEL: llvm.func @on_narrow
  // CHECK-SAME: target_cpu = "x86-64"
  // CHECK-SAME: target_features = #llvm.target_features<["+sse4.2"]>
  llvm.func @on_narrow() attributes {sparse_iter.target = "narrow"} {
    llvm.return
  }
  // CHECK-LABEL: llvm.func @on_wide
  // CHECK-SAME: target_features = #llvm.target_features<["+avx2", "+fma", "+avx512f", "+prefer-256-bit"]>
  llvm.func @on_wide() attributes {sparse_iter.target = "wide"} {
    llvm.return
  }
  // CHECK-LABEL: llvm.func @scalar
  // CHECK-SAME: target_features = #llvm.target_features<["+avx2"]>
  llvm.func @scalar() attributes {sparse_iter.target = "scalar"} {
    llvm.return
  }
  // CHECK-LABEL: llvm.func @shared
  // CHECK-NOT: target_features
  // CHECK: llvm.return
  llvm.func @shared() {
    llvm.return
  }
}

// -----

// A module without targets: nothing changes.
// CHECK-LABEL: llvm.func @plain
// CHECK-NOT: target_cpu
// CHECK: llvm.return
llvm.func @plain() {
  llvm.return
}
