// SpMV y = A x, A in CSR (32-bit positions and coordinates), dynamic shapes.
// benchmarks/cpu.py compiles it once with sparsecomp.compile for every matrix.

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

#spmv = {
  indexing_maps = [affine_map<(i, j) -> (i, j)>,  // A
                   affine_map<(i, j) -> (j)>,     // x
                   affine_map<(i, j) -> (i)>],    // y
  iterator_types = ["parallel", "reduction"]
}

func.func @spmv(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %empty = tensor.empty(%m) : tensor<?xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<?xf32>) -> tensor<?xf32>
  %y = linalg.generic #spmv
      ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y0 : tensor<?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
  } -> tensor<?xf32>
  return %y : tensor<?xf32>
}
