// SpMV y = A x written the way MLIR's own sparse tests are: upstream
// #sparse_tensor.encoding CSR without widths (index-typed positions and
// coordinates), a named op, and the output as an outs operand the caller
// passes. benchmarks/cpu.py calls it with scipy's CSR (int32 indices) and a
// zero y, as a user would.

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @spmv(%A: tensor<?x?xf32, #CSR>, %x: tensor<?xf32>,
                %y: tensor<?xf32>) -> tensor<?xf32> {
  %0 = linalg.matvec ins(%A, %x : tensor<?x?xf32, #CSR>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
