// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(sparse-iter-lower-upstream)'
// RUN: not sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-lower-upstream{vector-bits=100})' 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: pass 'sparse-iter-lower-upstream': vector-bits must be -1 (the target's), 0, 128, 256 or 512, got 100

// What the sparsifier refuses is reported at its own location, after one
// error at the marked function that says why it went upstream.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

// expected-error@+1 {{the upstream sparsifier failed compiling 'negative_bitcast'}}
func.func @negative_bitcast(%a: tensor<4x4xf64, #CSR>) -> tensor<4x4xi64, #CSR> attributes {sparse_iter.upstream = "requested"} {
  %r = tensor.bitcast %a : tensor<4x4xf64, #CSR> to tensor<4x4xi64, #CSR>
  // expected-error-re@+1 {{failed to legalize {{.*}}storage_specifier{{.*}}}}
  return %r : tensor<4x4xi64, #CSR>
}

// -----

// tensor.extract on a sparse tensor, which the sparsifier fails on with a type
// conversion error at the function's argument, is refused at the op first.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @negative_extract(%a: tensor<?x?xf64, #CSR>, %i: index) -> f64 attributes {sparse_iter.upstream = "requested"} {
  // expected-error@+1 {{'tensor.extract' on a sparse tensor is not supported by MLIR's sparsifier}}
  %v = tensor.extract %a[%i, %i] : tensor<?x?xf64, #CSR>
  return %v : f64
}
