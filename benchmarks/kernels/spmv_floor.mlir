// The floor of a CSR SpMV: y_i = sum_j A_ij * j reads what every CSR SpMV
// reads (positions, coordinates, values) and writes y, but gathers no x.
// benchmarks/spmv_floor.py times it beside the SpMV kernels.

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

#rows = {
  indexing_maps = [affine_map<(i, j) -> (i, j)>,  // A
                   affine_map<(i, j) -> (i)>],    // y
  iterator_types = ["parallel", "reduction"]
}

func.func @spmv_floor(%A: tensor<?x?xf32, #csr>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %empty = tensor.empty(%m) : tensor<?xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<?xf32>) -> tensor<?xf32>
  %y = linalg.generic #rows ins(%A : tensor<?x?xf32, #csr>) outs(%y0 : tensor<?xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %j = linalg.index 1 : index
      %ji = arith.index_cast %j : index to i32
      %jf = arith.sitofp %ji : i32 to f32
      %p = arith.mulf %a, %jf : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
  } -> tensor<?xf32>
  return %y : tensor<?xf32>
}
