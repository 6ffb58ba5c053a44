// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparse-iter-verify)' | FileCheck %s
// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(func.func(sparse-iter-verify))' | FileCheck %s

// Well-formed programs pass through unchanged.

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// CHECK-LABEL: func.func @valid
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK: %[[S:.*]] = sparse_iter.set_encoding %[[X]]
// CHECK: return %[[S]]
func.func @valid(%x: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  return %0 : tensor<?x?xf32, #csr>
}
