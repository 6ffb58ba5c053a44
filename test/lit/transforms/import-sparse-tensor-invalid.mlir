// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-import-sparse-tensor='allow-upstream=false'

// With allow-upstream=false, a function that must keep #sparse_tensor
// encodings is an error at its location.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
// expected-error@+1 {{cannot import 'negative_convert': it uses 'sparse_tensor.convert', which sparse_iter has no counterpart for}}
func.func @negative_convert(%d: tensor<4x8xf32>) -> tensor<4x8xf32, #CSR> {
  %0 = sparse_tensor.convert %d : tensor<4x8xf32> to tensor<4x8xf32, #CSR>
  return %0 : tensor<4x8xf32, #CSR>
}

// -----

#Slice = #sparse_tensor.encoding<{ map = (d0 : #sparse_tensor<slice(0, 4, 1)>, d1 : #sparse_tensor<slice(0, 8, 1)>) -> (d0 : dense, d1 : compressed) }>
// expected-error-re@+1 {{cannot import 'negative_slice': it has the encoding {{.*}}, which cannot be imported: dimension slices}}
func.func private @negative_slice(tensor<4x8xf32, #Slice>)

// -----

// The input is verified first: a bad sparse_iter layout is reported, not imported around.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)
