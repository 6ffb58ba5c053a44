// RUN: sparsecomp-opt %s --verify-diagnostics --sparse-iter-report-conversions

// Before specialization a destination is not a layout: its size is unknown.
func.func @early(%d: tensor<?x?xf32>) -> tensor<?x?xf32, #sparse_iter.sparsity<unstructured>> {
  // expected-error@+1 {{sparse-iter-report-conversions: #sparse_iter.sparsity<unstructured> is not a layout yet; run sparse-iter-specialize-encodings first}}
  %s = sparse_iter.set_encoding %d : tensor<?x?xf32> to tensor<?x?xf32, #sparse_iter.sparsity<unstructured>>
  return %s : tensor<?x?xf32, #sparse_iter.sparsity<unstructured>>
}
