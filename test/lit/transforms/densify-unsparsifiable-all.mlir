// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-densify-unsparsifiable=all=true | FileCheck %s --enable-var-scope

// all=true, the fallback's last try after the sparsifier crashed: every op with
// sparse inputs and dense results gets dense inputs, merger bodies included
// (select(cmpf) of a sparse and a dense operand aborted the sparsifier).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(i, j) -> (i, j)>

// CHECK-LABEL: func.func @select_max
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<?x?xf64, #{{[a-z]+}}>, %[[D:[a-z0-9]+]]: tensor<?x?xf64>
// CHECK: %[[C:.*]] = sparse_tensor.convert %[[A]] : tensor<?x?xf64, #{{.*}}> to tensor<?x?xf64>
// CHECK: linalg.generic {{.*}} ins(%[[C]], %[[D]] : tensor<?x?xf64>, tensor<?x?xf64>)
func.func @select_max(%a: tensor<?x?xf64, #CSR>, %d: tensor<?x?xf64>, %o: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %d : tensor<?x?xf64, #CSR>, tensor<?x?xf64>) outs(%o : tensor<?x?xf64>) {
  ^bb0(%x: f64, %y: f64, %z: f64):
    %c = arith.cmpf ogt, %x, %y : f64
    %v = arith.select %c, %x, %y : f64
    linalg.yield %v : f64
  } -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}

// A sparse result, and a body that says what happens at absent entries: left as
// they are.
// CHECK-LABEL: func.func @negative_sparse_result
// CHECK-NOT: sparse_tensor.convert
// CHECK: return
func.func @negative_sparse_result(%a: tensor<?x?xf64, #CSR>, %e: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%e : tensor<?x?xf64, #CSR>) {
  ^bb0(%x: f64, %z: f64):
    %v = arith.negf %x : f64
    linalg.yield %v : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}

// CHECK-LABEL: func.func @negative_semantic_body
// CHECK-NOT: sparse_tensor.convert
// CHECK: sparse_tensor.unary
func.func @negative_semantic_body(%a: tensor<?x?xf64, #CSR>, %o: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%o : tensor<?x?xf64>) {
  ^bb0(%x: f64, %z: f64):
    %v = sparse_tensor.unary %x : f64 to f64
      present = {
        ^bb0(%p: f64):
          sparse_tensor.yield %p : f64
      }
      absent = {}
    linalg.yield %v : f64
  } -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}
