// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-lower-buffers

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @unlowered_use(%A: tensor<?x?xf32, #csr>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'tensor.extract' on a sparse tensor is not supported by the lowering}}
  %v = tensor.extract %A[%c0, %c0] : tensor<?x?xf32, #csr>
  return %v : f32
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @left_behind(%d: index) -> index {
  // expected-error@+1 {{'tensor.empty' still has a sparse tensor after buffer lowering; only func arguments/results, calls and the sparse_iter access ops are lowered}}
  %e = tensor.empty(%d, %d) : tensor<?x?xf32, #csr>
  return %d : index
}
