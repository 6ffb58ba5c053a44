// RUN: sparsecomp-opt %s | sparsecomp-opt | FileCheck %s
// RUN: sparsecomp-opt %s --mlir-print-op-generic | sparsecomp-opt | FileCheck %s
// Printing is a fixed point: printing the printed module changes nothing.
// RUN: sparsecomp-opt %s -o %t.1 && sparsecomp-opt %t.1 -o %t.2 && diff %t.1 %t.2

// Every sparse_iter attribute and op prints and parses back unchanged.

#unstructured = #sparse_iter.sparsity<"unstructured", array<i64>, 0.01>
#nm = #sparse_iter.sparsity<"nm", array<i64: 2, 4>, 0.5>
#block = #sparse_iter.sparsity<"block", array<i64: 16, 16>, 0.1>
#ragged = #sparse_iter.sparsity<"ragged", array<i64>, 1.0>
#matmul_lhs = #sparse_iter.encoding<#unstructured, "linalg.matmul", 0, [f32, f32, f32],
  [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]>
#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32>
#csc = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (j, i)>, 64, 16>
#bsr = #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"],
  affine_map<(i, j) -> (i floordiv 16, j floordiv 16, i mod 16, j mod 16)>, 0, 0>
#coo = #sparse_iter.layout<["compressed_varied", "singleton"], affine_map<(i, j) -> (i, j)>, 64, 64>

// CHECK-LABEL: func.func private @encodings
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.encoding<#sparse_iter.sparsity<"unstructured", array<i64>, 1.000000e-02 : f64>, "linalg.matmul", 0 : i64, [f32, f32, f32], [#{{.*}}, #{{.*}}, #{{.*}}]>>
// CHECK-SAME: tensor<8x8xf16, #sparse_iter.sparsity<"nm", array<i64: 2, 4>, 5.000000e-01 : f64>>
// CHECK-SAME: tensor<32x32xf32, #sparse_iter.sparsity<"block", array<i64: 16, 16>, 1.000000e-01 : f64>>
// CHECK-SAME: tensor<?x?xi32, #sparse_iter.sparsity<"ragged", array<i64>, 1.000000e+00 : f64>>
func.func private @encodings(tensor<?x?xf32, #matmul_lhs>, tensor<8x8xf16, #nm>,
                             tensor<32x32xf32, #block>, tensor<?x?xi32, #ragged>)

// CHECK-LABEL: func.func private @layouts
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied"], #{{.*}}, 32 : i64, 32 : i64>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied"], #{{.*}}, 64 : i64, 16 : i64>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], #{{.*}}, 0 : i64, 0 : i64>
// CHECK-SAME: #sparse_iter.layout<["compressed_varied", "singleton"], #{{.*}}, 64 : i64, 64 : i64>
func.func private @layouts(tensor<?x?xf64, #csr>, tensor<?x?xf64, #csc>,
                           tensor<64x64xf32, #bsr>, tensor<?x?xf32, #coo>)

// CHECK-LABEL: func.func @ops
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK: %[[S:.*]] = "sparse_iter.set_encoding"(%[[X]]) : (tensor<?x?xf32>) -> tensor<?x?xf32, #sparse_iter.layout
// CHECK: %[[U:.*]] = "sparse_iter.unset_encoding"(%[[S]]) : (tensor<?x?xf32, #sparse_iter.layout{{.*}}>) -> tensor<?x?xf32>
// CHECK: return %[[U]]
func.func @ops(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %u = "sparse_iter.unset_encoding"(%s) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  return %u : tensor<?x?xf32>
}
