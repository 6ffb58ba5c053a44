// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-forward-returned-arguments

// The pass reports nothing of its own (it forwards only what it proves
// read-only and leaves the rest); like every sparsecomp pass it verifies
// sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)
