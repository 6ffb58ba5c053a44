// SDDMM out = S .* (X Y^T), sampled at the stored entries of S (CSR, 32-bit
// positions and coordinates). X is M x K, Y is N x K (both row-major, so the
// k loop is contiguous in both). The result has S's sparsity: its values are
// aligned with S's values. Dynamic shapes; benchmarks/cpu.py compiles it once.

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

#sddmm = {
  indexing_maps = [affine_map<(i, j, k) -> (i, j)>,  // S
                   affine_map<(i, j, k) -> (i, k)>,  // X
                   affine_map<(i, j, k) -> (j, k)>,  // Y
                   affine_map<(i, j, k) -> (i, j)>], // out
  iterator_types = ["parallel", "parallel", "reduction"]
}

func.func @sddmm(%S: tensor<?x?xf32, #csr>, %X: tensor<?x?xf32>,
                 %Y: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %S, %c1 : tensor<?x?xf32, #csr>
  %empty = tensor.empty(%m, %n) : tensor<?x?xf32, #csr>
  %out = linalg.generic #sddmm
      ins(%S, %X, %Y : tensor<?x?xf32, #csr>, tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%empty : tensor<?x?xf32, #csr>) {
    ^bb0(%s: f32, %x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %q = arith.mulf %s, %p : f32
      %r = arith.addf %acc, %q : f32
      linalg.yield %r : f32
  } -> tensor<?x?xf32, #csr>
  return %out : tensor<?x?xf32, #csr>
}
