// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-decompose-aggregates

// Like every sparsecomp pass it verifies sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

// Upstream's decomposition builds tensors (it would abort on buffers).
func.func @softmax_on_buffers(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
  // expected-error@+1 {{'linalg.softmax' on buffers is not supported: its decomposition takes tensors; write it on tensors}}
  linalg.softmax dimension(1) ins(%x : memref<4x8xf32>) outs(%out : memref<4x8xf32>)
  return
}

// -----

// ... and floating-point constants (it would abort on integers).
func.func @softmax_of_integers(%x: tensor<4x8xi32>, %out: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // expected-error@+1 {{'linalg.softmax' of i32 elements is not supported: its decomposition (max, exp, sum, divide) needs floating-point elements; convert the input to a float type first}}
  %r = linalg.softmax dimension(1) ins(%x : tensor<4x8xi32>) outs(%out : tensor<4x8xi32>) -> tensor<4x8xi32>
  return %r : tensor<4x8xi32>
}
