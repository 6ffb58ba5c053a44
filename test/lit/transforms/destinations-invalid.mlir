// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-destinations

// The attribute names an argument the function does not have.
// expected-error@+1 {{sparse_iter.destinations names argument 3 of a function with 2 arguments}}
func.func @beyond(%n: index, %x: tensor<?xf32>) -> tensor<?xf32>
    attributes {sparse_iter.destinations = array<i64: 3>} {
  return %x : tensor<?xf32>
}
