// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// The output of sparsecomp-cpu runs in upstream mlir-runner. The sparse
// matrix is built in the program (keep_all sparsify of a dense constant, a
// CSR tensor assembled in the kernel), then multiplies a vector through the
// OpenMP row loop: rows 7 = 1*1 + 2*3, 0, 22 = 3*2 + 4*4, 29 = 5*1 + 6*4.
// CHECK: ( 7, 0, 22, 29 )
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @main() {
  %d = arith.constant dense<[[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0],
                             [0.0, 3.0, 0.0, 4.0], [5.0, 0.0, 0.0, 6.0]]> : tensor<4x4xf32>
  %A = "sparse_iter.sparsify"(%d) {sparsifier = #sparse_iter.sparsifier<keep_all>}
      : (tensor<4x4xf32>) -> tensor<4x4xf32, #csr>
  %x = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<4xf32>
  %y = linalg.matvec ins(%A, %x : tensor<4x4xf32, #csr>, tensor<4xf32>)
                     outs(%z : tensor<4xf32>) -> tensor<4xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %y[%c0], %pad : tensor<4xf32>, vector<4xf32>
  vector.print %v : vector<4xf32>
  return
}
