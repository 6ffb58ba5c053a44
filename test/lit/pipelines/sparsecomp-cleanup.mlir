// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cleanup)' | FileCheck %s
// RUN: sparsecomp-opt %s --sparsecomp-cleanup | FileCheck %s

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// Round trips fold, then canonicalize and cse clean up what they exposed.
// CHECK-LABEL: func.func @cleanup
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @cleanup(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  %c = arith.constant 1.0 : f32
  %2 = tensor.cast %1 : tensor<?x?xf32> to tensor<?x?xf32>
  return %2, %1 : tensor<?x?xf32>, tensor<?x?xf32>
}
