// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-densify-unsparsifiable | FileCheck %s --enable-var-scope

#SV = #sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

// A max reduction: zero is not its identity, so every element is read.
// CHECK-LABEL: func.func @max
// CHECK-SAME: (%[[A:.*]]: tensor<?xf64, #{{.*}}>, %[[C:.*]]: tensor<f64>)
// CHECK: %[[D:.*]] = sparse_tensor.convert %[[A]] : tensor<?xf64, #{{.*}}> to tensor<?xf64>
// CHECK: linalg.generic {{.*}} ins(%[[D]] : tensor<?xf64>) outs(%[[C]] : tensor<f64>)
func.func @max(%a: tensor<?xf64, #SV>, %c: tensor<f64>) -> tensor<f64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%a : tensor<?xf64, #SV>) outs(%c : tensor<f64>) {
  ^bb0(%x: f64, %o: f64):
    %m = arith.maximumf %o, %x : f64
    linalg.yield %m : f64
  } -> tensor<f64>
  return %r : tensor<f64>
}

// An op the sparsifier's merger does not know (exp(0) = 1).
// CHECK-LABEL: func.func @exp_values
// CHECK: %[[D:.*]] = sparse_tensor.convert %{{.*}} : tensor<?x?xf64, #{{.*}}> to tensor<?x?xf64>
// CHECK: linalg.generic {{.*}} ins(%[[D]] : tensor<?x?xf64>)
func.func @exp_values(%a: tensor<?x?xf64, #CSR>, %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%c : tensor<?x?xf64>) {
  ^bb0(%x: f64, %o: f64):
    %e = math.exp %x : f64
    linalg.yield %e : f64
  } -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}

// Row sums and elementwise arithmetic stay sparse.
// CHECK-LABEL: func.func @negative_sum
// CHECK-NOT: sparse_tensor.convert
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x?xf64, #{{.*}}>)
func.func @negative_sum(%a: tensor<?x?xf64, #CSR>, %c: tensor<?xf64>) -> tensor<?xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%c : tensor<?xf64>) {
  ^bb0(%x: f64, %o: f64):
    %two = arith.constant 2.0 : f64
    %y = arith.mulf %x, %two : f64
    %s = arith.addf %o, %y : f64
    linalg.yield %s : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}

// CHECK-LABEL: func.func @negative_plus_one
// CHECK-NOT: sparse_tensor.convert
func.func @negative_plus_one(%a: tensor<?x?xf64, #CSR>, %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%c : tensor<?x?xf64>) {
  ^bb0(%x: f64, %o: f64):
    %one = arith.constant 1.0 : f64
    %y = arith.addf %x, %one : f64
    linalg.yield %y : f64
  } -> tensor<?x?xf64>
  return %r : tensor<?x?xf64>
}

// An elementwise update that reads the output: out * x is zero, not out,
// where x is zero, and the sparsifier would keep out there.
// CHECK-LABEL: func.func @scale_out
// CHECK: %[[D:.*]] = sparse_tensor.convert %{{.*}} : tensor<?xf64, #{{.*}}> to tensor<?xf64>
// CHECK: linalg.generic {{.*}} ins(%[[D]] : tensor<?xf64>)
func.func @scale_out(%a: tensor<?xf64, #SV>, %c: tensor<?xf64>) -> tensor<?xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<?xf64, #SV>) outs(%c : tensor<?xf64>) {
  ^bb0(%x: f64, %o: f64):
    %m = arith.mulf %o, %x : f64
    linalg.yield %m : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}

// An update out + x keeps out where x is zero: left to the sparsifier.
// CHECK-LABEL: func.func @negative_add_out
// CHECK-NOT: sparse_tensor.convert
// CHECK: linalg.generic
func.func @negative_add_out(%a: tensor<?xf64, #SV>, %c: tensor<?xf64>) -> tensor<?xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<?xf64, #SV>) outs(%c : tensor<?xf64>) {
  ^bb0(%x: f64, %o: f64):
    %m = arith.addf %o, %x : f64
    linalg.yield %m : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

// A product reduction (the output is read by a mulf): densified.
// CHECK-LABEL: func.func @product
// CHECK: sparse_tensor.convert
func.func @product(%a: tensor<?x?xi64, #CSR>, %c: tensor<?xi64>) -> tensor<?xi64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x?xi64, #CSR>) outs(%c : tensor<?xi64>) {
  ^bb0(%x: i64, %o: i64):
    %p = arith.muli %x, %o : i64
    linalg.yield %p : i64
  } -> tensor<?xi64>
  return %r : tensor<?xi64>
}
