// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(func.func(canonicalize))' | FileCheck %s

// set_encoding and unset_encoding fold their round trips in the dialect, so
// upstream canonicalize removes them; a round trip that changes the
// encoding is a layout conversion and stays.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

// CHECK-LABEL: func.func @unset_of_set
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK-NEXT: return %[[X]]
func.func @unset_of_set(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = sparse_iter.set_encoding %x : tensor<?x?xf32> to tensor<?x?xf32, #csr>
  %u = sparse_iter.unset_encoding %s : tensor<?x?xf32, #csr> to tensor<?x?xf32>
  return %u : tensor<?x?xf32>
}

// CHECK-LABEL: func.func @set_of_unset
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout
// CHECK-NEXT: return %[[A]]
func.func @set_of_unset(%a: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  %u = sparse_iter.unset_encoding %a : tensor<?x?xf32, #csr> to tensor<?x?xf32>
  %s = sparse_iter.set_encoding %u : tensor<?x?xf32> to tensor<?x?xf32, #csr>
  return %s : tensor<?x?xf32, #csr>
}

// CHECK-LABEL: func.func @negative_conversion
// CHECK: %[[U:.*]] = sparse_iter.unset_encoding
// CHECK: %[[S:.*]] = sparse_iter.set_encoding %[[U]]
// CHECK: return %[[S]]
func.func @negative_conversion(%a: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc> {
  %u = sparse_iter.unset_encoding %a : tensor<?x?xf32, #csr> to tensor<?x?xf32>
  %s = sparse_iter.set_encoding %u : tensor<?x?xf32> to tensor<?x?xf32, #csc>
  return %s : tensor<?x?xf32, #csc>
}
