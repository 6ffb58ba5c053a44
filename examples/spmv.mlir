// Sparse matrix-vector product y = A x with A stored as CSR.
//
// Ordinary linalg on tensors; only the matrix type carries a #sparse_iter
// layout, and all sizes are dynamic, so one compile serves every matrix.
//
//   python examples/run.py examples/spmv.mlir
//   sparsecomp-opt examples/spmv.mlir --pass-pipeline='builtin.module(sparsecomp-cpu)'

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @spmv(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
