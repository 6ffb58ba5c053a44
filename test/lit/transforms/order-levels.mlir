// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-order-levels | FileCheck %s --enable-var-scope

// A nonordered level becomes ordered everywhere: the signature, the recorded
// tensor signature, a conversion's result and the caller's call.
// CHECK-DAG: #[[$CSC:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed){{.*}} }>
// CHECK-LABEL: func.func @rowsum
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #[[$CSC]]>, %{{.*}}: tensor<?xf32>) -> tensor<?xf32>
// CHECK-SAME: sparse_iter.tensor_signature = (tensor<?x?xf32, #[[$CSC]]>, tensor<?xf32>) -> tensor<?xf32>
// CHECK-LABEL: func.func @caller
// CHECK: sparse_tensor.convert %{{.*}} : tensor<2x2xf32> to tensor<2x2xf32, #[[$CSC]]>
// CHECK: call @rowsum(%{{.*}}) : (tensor<?x?xf32, #[[$CSC]]>, tensor<?xf32>) -> tensor<?xf32>
#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed(nonordered)) }>
#row = {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
        iterator_types = ["parallel", "reduction"]}
func.func @rowsum(%a: tensor<?x?xf32, #CSC>, %o: tensor<?xf32>) -> tensor<?xf32>
    attributes {sparse_iter.tensor_signature = (tensor<?x?xf32, #CSC>, tensor<?xf32>) -> tensor<?xf32>} {
  %r = linalg.generic #row ins(%a : tensor<?x?xf32, #CSC>) outs(%o : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @caller(%d: tensor<2x2xf32>, %o: tensor<?xf32>) -> tensor<?xf32> {
  %a = sparse_tensor.convert %d : tensor<2x2xf32> to tensor<2x2xf32, #CSC>
  %c = tensor.cast %a : tensor<2x2xf32, #CSC> to tensor<?x?xf32, #CSC>
  %r = call @rowsum(%c, %o) : (tensor<?x?xf32, #CSC>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// A function that reads the coordinates buffer keeps its nonordered type.
// CHECK: #[[$KEPT:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed(nonordered)) }>
// CHECK-LABEL: func.func @negative_exposed
// CHECK: sparse_tensor.coordinates %{{.*}} {level = 1 : index} : tensor<?x?xf32, #[[$KEPT]]>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed(nonordered)) }>
func.func @negative_exposed(%a: tensor<?x?xf32, #CSR>) -> memref<?xindex> {
  %c = sparse_tensor.coordinates %a {level = 1 : index} : tensor<?x?xf32, #CSR> to memref<?xindex>
  return %c : memref<?xindex>
}
