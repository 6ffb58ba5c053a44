// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-densify-unsparsifiable | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-densify-unsparsifiable=all=true | FileCheck %s --enable-var-scope --check-prefix=ALL

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

// -----

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id2 = affine_map<(i, j) -> (i, j)>

// A sparse output the body reads, initialized by an argument, with an input that
// drives the loops: computed dense, converted back (the sparsifier read such an
// output as zero and returned garbage).
// CHECK-LABEL: func.func @read_sparse_out
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf64>, %[[X:.*]]: tensor<?x?xf64, #[[E:.*]]>)
// CHECK: %[[D:.*]] = sparse_tensor.convert %[[X]] : tensor<?x?xf64, #[[E]]> to tensor<?x?xf64>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<?x?xf64>) outs(%[[D]] : tensor<?x?xf64>)
// CHECK: %[[S:.*]] = sparse_tensor.convert %[[R]] : tensor<?x?xf64> to tensor<?x?xf64, #[[E]]>
// CHECK: return %[[S]]
func.func @read_sparse_out(%a: tensor<?x?xf64>, %x: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64>) outs(%x : tensor<?x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %m = arith.mulf %v, %o : f64
    %s = arith.addf %o, %m : f64
    linalg.yield %s : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}

// A sparse output the body does not read: it starts from an empty tensor of its type.
// CHECK-LABEL: func.func @unread_sparse_out
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf64, #[[E:.*]]>, %[[X:.*]]: tensor<?x?xf64, #[[E]]>)
// CHECK-DAG: %[[M:.*]] = tensor.dim %[[X]], %c0
// CHECK-DAG: %[[N:.*]] = tensor.dim %[[X]], %c1
// CHECK: %[[E0:.*]] = tensor.empty(%[[M]], %[[N]]) : tensor<?x?xf64, #[[E]]>
// CHECK: linalg.generic {{.*}} ins(%[[A]] : {{.*}}) outs(%[[E0]] : tensor<?x?xf64, #[[E]]>)
func.func @unread_sparse_out(%a: tensor<?x?xf64, #CSR>, %x: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%x : tensor<?x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %n = arith.negf %v : f64
    linalg.yield %n : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}

// The same with a partly static shape: the empty tensor keeps the static size.
// CHECK-LABEL: func.func @unread_static_sparse_out
// CHECK-SAME: (%[[A:.*]]: tensor<5x?xf64, #[[E:.*]]>, %[[X:.*]]: tensor<5x?xf64, #[[E]]>)
// CHECK: %[[N:.*]] = tensor.dim %[[X]], %c1
// CHECK: %[[E0:.*]] = tensor.empty(%[[N]]) : tensor<5x?xf64, #[[E]]>
// CHECK: linalg.generic {{.*}} ins(%[[A]] : {{.*}}) outs(%[[E0]] : tensor<5x?xf64, #[[E]]>)
func.func @unread_static_sparse_out(%a: tensor<5x?xf64, #CSR>, %x: tensor<5x?xf64, #CSR>) -> tensor<5x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<5x?xf64, #CSR>) outs(%x : tensor<5x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %n = arith.negf %v : f64
    linalg.yield %n : f64
  } -> tensor<5x?xf64, #CSR>
  return %r : tensor<5x?xf64, #CSR>
}

// An update in place over the output's own entries (no inputs), and a sparse
// output built from tensor.empty: left to the sparsifier.
// CHECK-LABEL: func.func @negative_in_place
// CHECK-NOT: sparse_tensor.convert
// CHECK-NOT: tensor.empty
// CHECK: linalg.generic
func.func @negative_in_place(%x: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%x : tensor<?x?xf64, #CSR>) {
  ^bb0(%o: f64):
    %s = arith.addf %o, %o : f64
    linalg.yield %s : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}

// CHECK-LABEL: func.func @negative_fresh
// CHECK-NOT: sparse_tensor.convert
func.func @negative_fresh(%a: tensor<?x?xf64, #CSR>, %m: index, %n: index) -> tensor<?x?xf64, #CSR> {
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #CSR>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%e : tensor<?x?xf64, #CSR>) {
  ^bb0(%v: f64, %o: f64):
    %s = arith.negf %v : f64
    linalg.yield %s : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

// A custom reduction (sparse_tensor.unary / reduce) says what happens at stored and
// absent entries itself: left to the sparsifier (densified, its ops were refused).
// CHECK-LABEL: func.func @negative_custom_reduce
// CHECK-NOT: sparse_tensor.convert
// CHECK: sparse_tensor.reduce
func.func @negative_custom_reduce(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>) -> tensor<?xf64> {
  %one = arith.constant 1.0 : f64
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%x : tensor<?xf64>) {
  ^bb0(%v: f64, %o: f64):
    %m = sparse_tensor.reduce %v, %o, %one : f64 {
      ^bb0(%p: f64, %q: f64):
        %t = arith.mulf %p, %q : f64
        sparse_tensor.yield %t : f64
    }
    linalg.yield %m : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}

// -----

// all=true, the fallback's last try after the sparsifier crashed: every op with
// sparse inputs or results is computed dense, merger bodies included
// (select(cmpf) of a sparse and a dense operand aborted the sparsifier).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#id = affine_map<(i, j) -> (i, j)>

// ALL-LABEL: func.func @select_max
// ALL-SAME: (%[[A:[a-z0-9]+]]: tensor<?x?xf64, #{{[a-z]+}}>, %[[D:[a-z0-9]+]]: tensor<?x?xf64>
// ALL: %[[C:.*]] = sparse_tensor.convert %[[A]] : tensor<?x?xf64, #{{.*}}> to tensor<?x?xf64>
// ALL: linalg.generic {{.*}} ins(%[[C]], %[[D]] : tensor<?x?xf64>, tensor<?x?xf64>)
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

// A sparse result (max(CSR, dense) or exp(CSR) into CSR crashed the sparsifier):
// computed dense, materialized (the sparsifier would fold a convert of the op's
// result back into the op) and converted to the result's type.
// ALL-LABEL: func.func @sparse_result
// ALL-SAME: (%[[A:[a-z0-9]+]]: tensor<?x?xf64, #[[$S:[a-z]+]]>, %[[E:[a-z0-9]+]]: tensor<?x?xf64, #[[$S]]>)
// ALL-DAG: %[[M:.*]] = tensor.dim %[[E]], %c0
// ALL-DAG: %[[N:.*]] = tensor.dim %[[E]], %c1
// ALL: %[[D:.*]] = tensor.empty(%[[M]], %[[N]]) : tensor<?x?xf64>
// ALL: %[[C:.*]] = sparse_tensor.convert %[[A]] : tensor<?x?xf64, #[[$S]]> to tensor<?x?xf64>
// ALL: %[[G:.*]] = linalg.generic {{.*}} ins(%[[C]] : tensor<?x?xf64>) outs(%[[D]] : tensor<?x?xf64>)
// ALL: %[[K:.*]] = bufferization.materialize_in_destination %[[G]] in %[[D]]
// ALL: %[[R:.*]] = sparse_tensor.convert %[[K]] : tensor<?x?xf64> to tensor<?x?xf64, #[[$S]]>
// ALL: return %[[R]]
func.func @sparse_result(%a: tensor<?x?xf64, #CSR>, %e: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf64, #CSR>) outs(%e : tensor<?x?xf64, #CSR>) {
  ^bb0(%x: f64, %z: f64):
    %v = math.exp %x : f64
    linalg.yield %v : f64
  } -> tensor<?x?xf64, #CSR>
  return %r : tensor<?x?xf64, #CSR>
}

// A body that says what happens at absent entries: left as it is.
// ALL-LABEL: func.func @negative_semantic_body
// ALL-NOT: sparse_tensor.convert
// ALL: sparse_tensor.unary
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

// -----

#CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>

// linalg.index over a CSC operand: the sparsifier read the row's index for
// linalg.index 1 (A + j came out A + i), so the op is computed dense, its CSC
// result converted back after it.
// CHECK-LABEL: func.func @plus_column
// CHECK-SAME: (%[[A:.*]]: tensor<3x4xf32, #{{.*}}>)
// CHECK: %[[D:.*]] = sparse_tensor.convert %[[A]] : tensor<3x4xf32, #{{.*}}> to tensor<3x4xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[D]] : tensor<3x4xf32>) outs(%{{.*}} : tensor<3x4xf32>)
// CHECK: sparse_tensor.convert %{{.*}} : tensor<3x4xf32> to tensor<3x4xf32, #{{.*}}>
func.func @plus_column(%a: tensor<3x4xf32, #CSC>) -> tensor<3x4xf32, #CSC> {
  %e = tensor.empty() : tensor<3x4xf32, #CSC>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<3x4xf32, #CSC>) outs(%e : tensor<3x4xf32, #CSC>) {
  ^bb0(%x: f32, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %jf = arith.sitofp %ji : i32 to f32
    %v = arith.addf %x, %jf : f32
    linalg.yield %v : f32
  } -> tensor<3x4xf32, #CSC>
  return %r : tensor<3x4xf32, #CSC>
}
