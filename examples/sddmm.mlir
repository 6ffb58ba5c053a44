// Sampled dense-dense matrix product: out = S .* (X Y^T), computed only at
// the nonzeros of S. The output is sparse with S's structure: the kernel
// computes one value per stored entry and reuses S's index buffers.
//
//   python examples/run.py examples/sddmm.mlir

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @sddmm(%S: tensor<?x?xf32, #csr>, %X: tensor<?x?xf32>, %Y: tensor<?x?xf32>)
    -> tensor<?x?xf32, #csr> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %S, %c1 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #csr>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>,
                       affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%S, %X, %Y : tensor<?x?xf32, #csr>, tensor<?x?xf32>, tensor<?x?xf32>)
    outs(%e : tensor<?x?xf32, #csr>) {
  ^bb0(%s: f32, %x: f32, %y: f32, %o: f32):
    %xy = arith.mulf %x, %y : f32
    %v = arith.mulf %s, %xy : f32
    %acc = arith.addf %o, %v : f32
    linalg.yield %acc : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}
