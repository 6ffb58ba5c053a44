// Sparse x dense matrix product C = A B with A as CSR and B, C dense.
//
// The matrix is annotated with its sparsity only; the target's resolver picks
// the layout (CSR here) in sparse-iter-specialize-encodings.
//
//   python examples/run.py examples/spmm.mlir

#sparse = #sparse_iter.sparsity<unstructured, density = 0.01>

func.func @spmm(%A: tensor<?x?xf32, #sparse>, %B: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #sparse>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #sparse>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
