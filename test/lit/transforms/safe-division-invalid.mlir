// RUN: sparsecomp-opt %s --verify-diagnostics --sparse-iter-safe-division

// Like every sparsecomp pass it verifies sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)
