// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-check-reshapes

// The pass reports nothing of its own at compile time (sizes that do not
// multiply out are a run-time error); like every sparsecomp pass it verifies
// sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)
