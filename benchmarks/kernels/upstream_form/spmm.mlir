// SpMM C = A B written the way MLIR's own sparse tests are: upstream
// #sparse_tensor.encoding CSR without widths (index-typed), linalg.matmul,
// and C as an outs operand the caller passes (a zero C in benchmarks/cpu.py,
// with scipy's CSR as A).

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @spmm(%A: tensor<?x?xf32, #CSR>, %B: tensor<?x?xf32>,
                %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%A, %B : tensor<?x?xf32, #CSR>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
