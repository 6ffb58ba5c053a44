// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-report-conversions | FileCheck %s

// Each conversion is a remark at its location; the IR is unchanged. A static
// shape gives the bytes of the tensor built: a number for a dense result,
// fixed + per-entry bytes for a sparse one (CSR 4x6 f64, 32-bit indices:
// 5 positions of 4 bytes, then 4 + 8 bytes per stored entry).
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>
// CHECK-LABEL: func.func @convert
// CHECK: sparse_iter.set_encoding
// CHECK: sparse_iter.unset_encoding
// CHECK: sparse_iter.set_encoding
func.func @convert(%d: tensor<4x6xf64>, %a: tensor<?x?xf32, #csc>)
    -> (tensor<4x6xf64, #csr>, tensor<4x6xf64>, tensor<?x?xf32, #csr>) {
  // expected-remark@+1 {{in 'convert': converts a 4x6 float64 tensor from dense to #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>; 20 + 12*nse bytes}}
  %s = sparse_iter.set_encoding %d : tensor<4x6xf64> to tensor<4x6xf64, #csr>
  // expected-remark@+1 {{in 'convert': converts a 4x6 float64 tensor from #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}> to dense; 192 bytes}}
  %back = sparse_iter.unset_encoding %s : tensor<4x6xf64, #csr> to tensor<4x6xf64>
  // expected-remark@+1 {{in 'convert': converts a ?x? float32 tensor from #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}> to #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>; bytes depend on the shape (dynamic)}}
  %t = sparse_iter.set_encoding %a : tensor<?x?xf32, #csc> to tensor<?x?xf32, #csr>
  return %s, %back, %t : tensor<4x6xf64, #csr>, tensor<4x6xf64>, tensor<?x?xf32, #csr>
}

// -----

// No conversions, no remarks.
// CHECK-LABEL: func.func @none
func.func @none(%d: tensor<4xf32>) -> tensor<4xf32> {
  return %d : tensor<4xf32>
}
