// SDDMM out = S .* (X Y^T) with upstream's #sparse_tensor.encoding CSR
// without widths (index-typed). Its output has S's sparsity, so there is no
// dense outs operand to pass: it is a tensor.empty of S's type, as in
// upstream's sampled-product tests. Called with scipy's CSR as S.

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

#sddmm = {
  indexing_maps = [affine_map<(i, j, k) -> (i, j)>,  // S
                   affine_map<(i, j, k) -> (i, k)>,  // X
                   affine_map<(i, j, k) -> (j, k)>,  // Y
                   affine_map<(i, j, k) -> (i, j)>], // out
  iterator_types = ["parallel", "parallel", "reduction"]
}

func.func @sddmm(%S: tensor<?x?xf32, #CSR>, %X: tensor<?x?xf32>,
                 %Y: tensor<?x?xf32>) -> tensor<?x?xf32, #CSR> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?xf32, #CSR>
  %n = tensor.dim %S, %c1 : tensor<?x?xf32, #CSR>
  %empty = tensor.empty(%m, %n) : tensor<?x?xf32, #CSR>
  %out = linalg.generic #sddmm
      ins(%S, %X, %Y : tensor<?x?xf32, #CSR>, tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%empty : tensor<?x?xf32, #CSR>) {
    ^bb0(%s: f32, %x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %q = arith.mulf %s, %p : f32
      %r = arith.addf %acc, %q : f32
      linalg.yield %r : f32
  } -> tensor<?x?xf32, #CSR>
  return %out : tensor<?x?xf32, #CSR>
}
