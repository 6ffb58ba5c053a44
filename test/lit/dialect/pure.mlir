// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(func.func(cse,canonicalize))' | FileCheck %s

// sparse_iter ops are Pure: cse merges equal ones and canonicalize deletes
// those whose results are unused, as for any side-effect free upstream op.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// CHECK-LABEL: func.func @merged
// CHECK-SAME: (%[[A:.*]]: tensor
// CHECK: %[[P:.*]] = sparse_iter.positions %[[A]][1]
// CHECK-NOT: sparse_iter.positions
// CHECK: return %[[P]], %[[P]]
func.func @merged(%a: tensor<?x?xf32, #csr>) -> (tensor<?xi32>, tensor<?xi32>) {
  %p = "sparse_iter.positions"(%a) {level = 1 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  %q = "sparse_iter.positions"(%a) {level = 1 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  return %p, %q : tensor<?xi32>, tensor<?xi32>
}

// CHECK-LABEL: func.func @dead
// CHECK-NOT: = sparse_iter.
// CHECK: return
func.func @dead(%a: tensor<?x?xf32, #csr>, %d: tensor<4x4xf32>) {
  %c = "sparse_iter.coordinates"(%a) {level = 1 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  %v = "sparse_iter.values"(%a) : (tensor<?x?xf32, #csr>) -> tensor<?xf32>
  %s = "sparse_iter.set_encoding"(%d) : (tensor<4x4xf32>) -> tensor<4x4xf32, #csr>
  %n = sparse_iter.storage_size %a : tensor<?x?xf32, #csr>
  return
}
