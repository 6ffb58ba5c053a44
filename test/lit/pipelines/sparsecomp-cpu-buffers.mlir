// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-buffers)' | FileCheck %s

// Stage II in, stage III out: no encoding is left and the ABI is recorded.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// CHECK-LABEL: func.func @nnz_values
// CHECK-SAME: (%{{.*}}: tensor<?xi32>, %{{.*}}: tensor<?xi32>, %[[V:.*]]: tensor<?xf32>, %{{.*}}: index, %{{.*}}: index) -> tensor<?xf32>
// CHECK-SAME: sparse_iter.abi
// CHECK-NOT: tensor<?x?xf32, #sparse_iter.layout
// CHECK: return %[[V]]
func.func @nnz_values(%A: tensor<?x?xf32, #csr>) -> tensor<?xf32> {
  %v = "sparse_iter.values"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?xf32>
  return %v : tensor<?xf32>
}
