// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-fold-encodings)' | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='max-iterations=1' | FileCheck %s --enable-var-scope

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

// CHECK-LABEL: func.func @unset_of_set
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK-NOT: = sparse_iter.
// CHECK: return %[[X]]
func.func @unset_of_set(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}

// CHECK-LABEL: func.func @set_of_unset
// CHECK-SAME: (%[[Y:.*]]: tensor<?x?xf32, #sparse_iter.layout
// CHECK-NOT: = sparse_iter.
// CHECK: return %[[Y]]
func.func @set_of_unset(%y: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  %0 = "sparse_iter.unset_encoding"(%y) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  %1 = "sparse_iter.set_encoding"(%0) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  return %1 : tensor<?x?xf32, #csr>
}

// The inner op stays while something else still uses it.
// CHECK-LABEL: func.func @inner_still_used
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK: %[[S:.*]] = sparse_iter.set_encoding %[[X]]
// CHECK-NOT: unset_encoding
// CHECK: return %[[X]], %[[S]]
func.func @inner_still_used(%x: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32, #csr>) {
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  return %1, %0 : tensor<?x?xf32>, tensor<?x?xf32, #csr>
}

// A change of layout (#csr -> plain -> #csc) is a conversion, not a round trip.
// CHECK-LABEL: func.func @negative_layout_change
// CHECK: sparse_iter.unset_encoding
// CHECK: sparse_iter.set_encoding
func.func @negative_layout_change(%y: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc> {
  %0 = "sparse_iter.unset_encoding"(%y) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  %1 = "sparse_iter.set_encoding"(%0) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csc>
  return %1 : tensor<?x?xf32, #csc>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// Nested round trips fold completely.
// CHECK-LABEL: func.func @nested
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf64>)
// CHECK-NOT: = sparse_iter.
// CHECK: return %[[X]]
func.func @nested(%x: tensor<4x4xf64>) -> tensor<4x4xf64> {
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<4x4xf64>) -> tensor<4x4xf64, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<4x4xf64, #csr>) -> tensor<4x4xf64>
  %2 = "sparse_iter.set_encoding"(%1) : (tensor<4x4xf64>) -> tensor<4x4xf64, #csr>
  %3 = "sparse_iter.unset_encoding"(%2) : (tensor<4x4xf64, #csr>) -> tensor<4x4xf64>
  return %3 : tensor<4x4xf64>
}
