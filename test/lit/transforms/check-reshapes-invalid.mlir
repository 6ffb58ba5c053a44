// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-check-reshapes

// Sizes that do not multiply out are a run-time error; at compile time the
// pass refuses a group of two dynamic sizes or more (the sparsifier gave each
// the source's size), and like every sparsecomp pass it verifies sparse_iter
// input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#CSF = #sparse_tensor.encoding<{ map = (i, j, k) -> (i : compressed, j : compressed, k : compressed) }>
func.func @two_dynamic(%a: tensor<?x?xf64, #CSR>, %q: index, %m: index, %n: index) -> tensor<?x?x?xf64, #CSF> {
  // expected-error@+1 {{'two_dynamic' expands dimension 0 of a sparse tensor into 2 dynamic sizes (result dimensions 0, 1)}}
  %r = tensor.expand_shape %a [[0, 1], [2]] output_shape [%q, %m, %n] : tensor<?x?xf64, #CSR> into tensor<?x?x?xf64, #CSF>
  return %r : tensor<?x?x?xf64, #CSF>
}
