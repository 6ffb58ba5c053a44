// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// Narrow positions are unsigned, as upstream reads them: a
// CSR matrix built in the program with 8-bit positions holds 192 entries
// (positions 128..192 are negative as signed bytes; read signed they sent
// the row loop out of bounds). Each row of ones times ones sums to 12.
// CHECK: ( 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12 )
#csr8 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 8, crdWidth = 8}>
func.func @main() {
  %d = arith.constant dense<1.0> : tensor<16x12xf32>
  %A = "sparse_iter.set_encoding"(%d) : (tensor<16x12xf32>) -> tensor<16x12xf32, #csr8>
  %x = arith.constant dense<1.0> : tensor<12xf32>
  %z = arith.constant dense<0.0> : tensor<16xf32>
  %y = linalg.matvec ins(%A, %x : tensor<16x12xf32, #csr8>, tensor<12xf32>)
                     outs(%z : tensor<16xf32>) -> tensor<16xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %y[%c0], %pad : tensor<16xf32>, vector<16xf32>
  vector.print %v : vector<16xf32>
  return
}
