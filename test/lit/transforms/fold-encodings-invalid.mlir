// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-fold-encodings
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='max-iterations=0' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='max-iterations=many' 2>&1 | FileCheck %s --check-prefix=OPTION-TYPE
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='iterations=2' 2>&1 | FileCheck %s --check-prefix=OPTION-NAME
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='max-iterations=9999999999' 2>&1 | FileCheck %s --check-prefix=OPTION-BIG
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='max-iterations=99999999999999999999999' 2>&1 | FileCheck %s --check-prefix=OPTION-HUGE

// OPTION: error: pass 'sparse-iter-fold-encodings': max-iterations must be at least 1 and below 2^31, got 0
// OPTION-TYPE: error: invalid value 'many' for option 'max-iterations': expected a 64-bit integer
// OPTION-BIG: error: pass 'sparse-iter-fold-encodings': max-iterations must be at least 1 and below 2^31, got 9999999999
// OPTION-HUGE: error: invalid value '99999999999999999999999' for option 'max-iterations': expected a 64-bit integer
// OPTION-HUGE-NOT: Traceback
// OPTION-NAME: error: pass 'sparse-iter-fold-encodings' has no option 'iterations' (options: max-iterations, test-convergence)

// The pass refuses malformed sparse_iter ops instead of folding them.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @fold_mismatched(%x: tensor<4x4xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{sparse_iter.set_encoding must keep shape and element type}}
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<4x4xf32>) -> tensor<?x?xf32, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}

// -----

func.func @fold_bad_layout(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{unknown level format 'csr'}}
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?xf32>) -> tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : csr), posWidth = 32, crdWidth = 32}>>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : csr), posWidth = 32, crdWidth = 32}>>) -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// With test-convergence, running out of iterations is an error.
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-fold-encodings='max-iterations=1 test-convergence=true' 2>&1 | FileCheck %s --check-prefix=CONVERGE
// CONVERGE: error: sparse-iter-fold-encodings did not converge within 1 iterations
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @converge(%x: tensor<4x4xf64>) -> tensor<4x4xf64> {
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<4x4xf64>) -> tensor<4x4xf64, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<4x4xf64, #csr>) -> tensor<4x4xf64>
  return %1 : tensor<4x4xf64>
}
