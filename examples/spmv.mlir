// Sparse matrix-vector product y = A x with A stored as CSR.
//
// The program is ordinary linalg on tensors; the matrix type carries a
// #sparse_iter layout. `x` arrives dense and is converted to the sparse
// layout and back, a round trip that sparse-iter-fold-encodings removes.
//
//   sparsecomp-opt examples/spmv.mlir --pass-pipeline='builtin.module(sparsecomp-cleanup)'

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"],
                           affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#sparse_vec = #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 32, 32, {}>

func.func @spmv(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>,
                %y: tensor<?xf32>) -> tensor<?xf32> {
  // A producer that hands over a sparse copy of x, and a consumer that wants it dense.
  %xs = "sparse_iter.set_encoding"(%x) : (tensor<?xf32>) -> tensor<?xf32, #sparse_vec>
  %xd = "sparse_iter.unset_encoding"(%xs) : (tensor<?xf32, #sparse_vec>) -> tensor<?xf32>
  %r = linalg.matvec ins(%A, %xd : tensor<?x?xf32, #csr>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
