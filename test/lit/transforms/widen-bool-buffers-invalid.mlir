// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-widen-bool-buffers

// Like every sparsecomp pass it verifies sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

// An i1 buffer it cannot rewrite while the module stores to an i1 buffer
// (whose lowering would abort).
func.func @store_and_prefetch(%n: index) {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %m = memref.alloc(%n) : memref<?xi1>
  // expected-error@+1 {{'memref.prefetch' uses an i1 buffer, which sparse-iter-widen-bool-buffers cannot store as i8}}
  memref.prefetch %m[%c0], read, locality<3>, data : memref<?xi1>
  memref.store %true, %m[%c0] : memref<?xi1>
  return
}
