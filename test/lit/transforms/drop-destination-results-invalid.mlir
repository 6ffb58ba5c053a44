// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-drop-destination-results

// A function with destinations that the module calls: its callers would break.
// expected-error@+1 {{sparse-iter-drop-destination-results: '@called' has destinations and is called inside the module}}
func.func @called(%d: memref<?xf32>) -> memref<?xf32>
    attributes {sparse_iter.destinations = array<i64: 0>} {
  return %d : memref<?xf32>
}

func.func @caller(%d: memref<?xf32>) -> memref<?xf32> {
  %r = call @called(%d) : (memref<?xf32>) -> memref<?xf32>
  return %r : memref<?xf32>
}
