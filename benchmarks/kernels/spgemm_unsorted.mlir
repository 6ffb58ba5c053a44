// SpGEMM C = A B of two CSR matrices (32-bit positions and coordinates), dynamic
// shapes, C's columns in each row left in the order the product finds them
// (compressed(nonordered)), as scipy's and MKL's mkl_sparse_spmm leave them.
// benchmarks/cpu.py's sparsecomp-unsorted peer calls it with A = B (C = A A).

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#unsorted = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed(nonordered)), posWidth = 32, crdWidth = 32}>

func.func @spgemm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #unsorted> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32, #csr>
  %empty = tensor.empty(%m, %n) : tensor<?x?xf32, #unsorted>
  %C = linalg.matmul ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csr>)
                     outs(%empty : tensor<?x?xf32, #unsorted>) -> tensor<?x?xf32, #unsorted>
  return %C : tensor<?x?xf32, #unsorted>
}
