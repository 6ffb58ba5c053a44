// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-wrap-upstream

// The two signatures must agree (CSR has three buffers, not one).
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// expected-error-re@+1 {{cannot give 'negative_mismatch' the sparsecomp ABI: the sparsified signature does not flatten tensor<?x?xf64, #sparse{{.*}}> as expected}}
func.func @negative_mismatch(%v: memref<?xf64>, %s: !sparse_tensor.storage_specifier<#CSR>)
    attributes {sparse_iter.tensor_signature = (tensor<?x?xf64, #CSR>) -> ()} {
  return
}

// -----

// A specifier the tensor signature does not account for.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// expected-error@+1 {{cannot give 'negative_count' the sparsecomp ABI: the sparsified signature does not match the tensor signature}}
func.func @negative_count(%v: memref<?xf64>, %s: !sparse_tensor.storage_specifier<#CSR>)
    attributes {sparse_iter.tensor_signature = (tensor<?xf64>) -> ()} {
  return
}

// -----

// The input is verified first: a bad sparse_iter layout is reported.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)
