// SpGEMM C = A B written the way MLIR's own sparse tests are: upstream
// #sparse_tensor.encoding CSR without widths (index-typed), a sparse
// tensor.empty output, linalg.matmul (called with scipy's CSR as A and B).

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @spgemm(%A: tensor<?x?xf32, #CSR>, %B: tensor<?x?xf32, #CSR>) -> tensor<?x?xf32, #CSR> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #CSR>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32, #CSR>
  %C0 = tensor.empty(%m, %n) : tensor<?x?xf32, #CSR>
  %C = linalg.matmul ins(%A, %B : tensor<?x?xf32, #CSR>, tensor<?x?xf32, #CSR>)
                     outs(%C0 : tensor<?x?xf32, #CSR>) -> tensor<?x?xf32, #CSR>
  return %C : tensor<?x?xf32, #CSR>
}
