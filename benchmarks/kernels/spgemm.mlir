// SpGEMM C = A B of two CSR matrices (32-bit positions and coordinates), dynamic
// shapes, C in CSR with its rows in order. benchmarks/cpu.py compiles it once
// with sparsecomp.compile and calls it with A = B (C = A A).

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @spgemm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32, #csr>
  %empty = tensor.empty(%m, %n) : tensor<?x?xf32, #csr>
  %C = linalg.matmul ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csr>)
                     outs(%empty : tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr>
  return %C : tensor<?x?xf32, #csr>
}
