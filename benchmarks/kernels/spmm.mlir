// SpMM C = A B, A in CSR (32-bit positions and coordinates), B and C dense
// row-major, dynamic shapes (any K). benchmarks/cpu.py compiles it once.

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

#spmm = {
  indexing_maps = [affine_map<(i, j, k) -> (i, k)>,  // A
                   affine_map<(i, j, k) -> (k, j)>,  // B
                   affine_map<(i, j, k) -> (i, j)>], // C
  iterator_types = ["parallel", "parallel", "reduction"]
}

func.func @spmm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %empty = tensor.empty(%m, %n) : tensor<?x?xf32>
  %c0s = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x?xf32>) -> tensor<?x?xf32>
  %C = linalg.generic #spmm
      ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%c0s : tensor<?x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %C : tensor<?x?xf32>
}
