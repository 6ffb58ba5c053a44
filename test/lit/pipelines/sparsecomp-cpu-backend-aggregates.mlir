// RUN: not sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-backend)' -o /dev/null 2>&1 \
// RUN:   | FileCheck %s

// The back end alone does not decompose linalg.softmax (stage I does): it is
// refused at the op, where the LLVM stage used to leave it in its output,
// wrapped in unrealized casts, and succeed.
// CHECK: sparsecomp-cpu-backend-aggregates.mlir:[[# @LINE + 3]]:8: error: 'linalg.softmax' was not lowered to the LLVM dialect: aggregate ops are decomposed by sparse-iter-decompose-aggregates
// CHECK-NOT: error
func.func @softmax(%x: tensor<4x8xf32>, %e: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = linalg.softmax dimension(1) ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
