// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-decompose-aggregates | FileCheck %s --enable-var-scope

// A dense softmax along dimension 1: the max (from NaN, which maxnumf drops),
// exp(x - max), their sum (from 0) and the quotient, into the softmax's own
// output.
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax_rows
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf64>, %[[OUT:.*]]: tensor<4x8xf64>)
// CHECK-NOT: linalg.softmax
// CHECK: %[[ACC:.*]] = tensor.empty() : tensor<4xf64>
// CHECK: %[[NAN:.*]] = arith.constant 0xFFF8000000000000 : f64
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[NAN]] : f64) outs(%[[ACC]] : tensor<4xf64>)
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<4x8xf64>) outs(%[[INIT]] : tensor<4xf64>)
// CHECK: arith.maxnumf
// CHECK: %[[EXP:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MAX]] : tensor<4x8xf64>, tensor<4xf64>) outs(%[[OUT]] : tensor<4x8xf64>)
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[EXP]] : tensor<4x8xf64>) outs(%[[ZERO]] : tensor<4xf64>)
// CHECK: arith.addf
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[EXP]], %[[SUM]] : tensor<4x8xf64>, tensor<4xf64>) outs(%[[OUT]] : tensor<4x8xf64>)
// CHECK: arith.divf
// CHECK: return %[[R]]
func.func @softmax_rows(%x: tensor<4x8xf64>, %out: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %r = linalg.softmax dimension(1) ins(%x : tensor<4x8xf64>) outs(%out : tensor<4x8xf64>) -> tensor<4x8xf64>
  return %r : tensor<4x8xf64>
}

// -----

// A sparse input into a dense output: upstream types exp(x - max) like the
// input; it takes its init's (the output's) dense type. Along dimension 0
// the reductions run over rows.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// CHECK-DAG: #[[$COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @softmax_sparse_input
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32, #{{.*}}>, %[[OUT:.*]]: tensor<?x?xf32>)
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #[[$COL]]], iterator_types = ["reduction", "parallel"]} ins(%[[X]] : tensor<?x?xf32, #{{.*}}>) outs(%{{.*}} : tensor<?xf32>)
// CHECK: %[[EXP:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MAX]] : tensor<?x?xf32, #{{.*}}>, tensor<?xf32>) outs(%[[OUT]] : tensor<?x?xf32>)
// CHECK: } -> tensor<?x?xf32>
// CHECK: linalg.generic {{.*}} ins(%[[EXP]] : tensor<?x?xf32>)
func.func @softmax_sparse_input(%x: tensor<?x?xf32, #csr>, %out: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.softmax dimension(0) ins(%x : tensor<?x?xf32, #csr>) outs(%out : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// Structured named ops and non-structured ops without upstream's
// decomposition stay as they are.
// CHECK-LABEL: func.func @negative_not_aggregates
// CHECK: linalg.matmul
// CHECK: linalg.pack
func.func @negative_not_aggregates(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>, %d: tensor<2x2x4x4xf32>) -> (tensor<8x8xf32>, tensor<2x2x4x4xf32>) {
  %m = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.pack %a inner_dims_pos = [0, 1] inner_tiles = [4, 4] into %d : tensor<8x8xf32> -> tensor<2x2x4x4xf32>
  return %m, %p : tensor<8x8xf32>, tensor<2x2x4x4xf32>
}
