// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-pad-nm-converts | FileCheck %s --enable-var-scope

// Dense to 2:4: one loop over the 4 groups counts each group's nonzeros,
// then writes its 2 slots (nonzeros, padded with its first zeros) into
// coordinates (crdWidth 8) and values, which are assembled.
// CHECK-LABEL: func.func @dense_to_nm
// CHECK-SAME: (%[[D:.*]]: tensor<2x8xf32>)
// CHECK-DAG: %[[C0:.*]] = tensor.empty() : tensor<8xi8>
// CHECK-DAG: %[[V0:.*]] = tensor.empty() : tensor<8xf32>
// CHECK: %[[G:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[C0]], %{{.*}} = %[[V0]]) -> (tensor<8xi8>, tensor<8xf32>)
// CHECK:   tensor.extract %[[D]]
// CHECK:   arith.cmpf une
// CHECK:   tensor.insert
// CHECK: %[[A:.*]] = sparse_tensor.assemble (%[[G]]#0), %[[G]]#1 : (tensor<8xi8>), tensor<8xf32> to tensor<2x8xf32, #{{.*}}>
// CHECK-NOT: sparse_tensor.convert
// CHECK: return %[[A]]
#NM = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), crdWidth = 8 }>
func.func @dense_to_nm(%d: tensor<2x8xf32>) -> tensor<2x8xf32, #NM> {
  %a = sparse_tensor.convert %d : tensor<2x8xf32> to tensor<2x8xf32, #NM>
  return %a : tensor<2x8xf32, #NM>
}

// -----

// A sparse source goes through dense first.
// CHECK-LABEL: func.func @csr_to_nm
// CHECK: %[[D:.*]] = sparse_tensor.convert %{{.*}} : tensor<4x4xf64, #{{.*}}> to tensor<4x4xf64>
// CHECK: tensor.extract %[[D]]
// CHECK: sparse_tensor.assemble
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#NM = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]) }>
func.func @csr_to_nm(%c: tensor<4x4xf64, #CSR>) -> tensor<4x4xf64, #NM> {
  %a = sparse_tensor.convert %c : tensor<4x4xf64, #CSR> to tensor<4x4xf64, #NM>
  return %a : tensor<4x4xf64, #NM>
}

// -----

// Dynamic shapes, n:m sources and other targets are left alone.
// CHECK-LABEL: func.func @negative_dynamic
// CHECK: sparse_tensor.convert
// CHECK-NOT: sparse_tensor.assemble
// CHECK-LABEL: func.func @negative_csr_target
// CHECK: sparse_tensor.convert
// CHECK-NOT: sparse_tensor.assemble
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#NM = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]) }>
func.func @negative_dynamic(%d: tensor<?x8xf32>) -> tensor<?x8xf32, #NM> {
  %a = sparse_tensor.convert %d : tensor<?x8xf32> to tensor<?x8xf32, #NM>
  return %a : tensor<?x8xf32, #NM>
}
func.func @negative_csr_target(%d: tensor<2x8xf32>) -> tensor<2x8xf32, #CSR> {
  %a = sparse_tensor.convert %d : tensor<2x8xf32> to tensor<2x8xf32, #CSR>
  return %a : tensor<2x8xf32, #CSR>
}
