// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// linalg.softmax, an aggregate op, is decomposed in stage I and runs, dense
// and sparse. A vector of logarithms: softmax(log 1, log 1, log 2, log 4) is
// (1, 1, 2, 4) / 8.
// CHECK: ( 0.125, 0.125, 0.25, 0.5 )
// Columns of a CSR matrix whose column 2 stores only -log 3: its implicit
// zero is the column's max, and softmax(-log 3, 0) is (1/3, 1) / (4/3).
// CHECK: ( ( 0.25, 0.666667, 0.25, 0.8 ), ( 0.75, 0.333333, 0.75, 0.2 ) )

#csr = #sparse_tensor.encoding<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @main() {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f64
  %x = arith.constant dense<[0.0, 0.0, 0.6931471805599453, 1.3862943611198906]> : tensor<4xf64>
  %e = tensor.empty() : tensor<4xf64>
  %d = arith.constant dense<[[0.0, 0.6931471805599453, -1.0986122886681098, 1.3862943611198906],
                             [1.0986122886681098, 0.0, 0.0, 0.0]]> : tensor<2x4xf64>
  %A = sparse_tensor.convert %d : tensor<2x4xf64> to tensor<2x4xf64, #csr>
  %e2 = tensor.empty() : tensor<2x4xf64>
  %r = linalg.softmax dimension(0) ins(%x : tensor<4xf64>) outs(%e : tensor<4xf64>) -> tensor<4xf64>
  %s = linalg.softmax dimension(0) ins(%A : tensor<2x4xf64, #csr>) outs(%e2 : tensor<2x4xf64>) -> tensor<2x4xf64>
  %v = vector.transfer_read %r[%c0], %pad : tensor<4xf64>, vector<4xf64>
  vector.print %v : vector<4xf64>
  %w = vector.transfer_read %s[%c0, %c0], %pad : tensor<2x4xf64>, vector<2x4xf64>
  vector.print %w : vector<2x4xf64>
  return
}
