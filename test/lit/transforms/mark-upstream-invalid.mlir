// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-mark-upstream

// Other sparse_iter ops have no upstream counterpart.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @negative_values(%a: tensor<?x?xf32, #csr>) -> tensor<?xf32> attributes {sparse_iter.upstream = "requested"} {
  // expected-error@+1 {{'negative_values' needs the upstream sparsifier (it requested), but 'sparse_iter.values' has no upstream counterpart}}
  %v = "sparse_iter.values"(%a) : (tensor<?x?xf32, #csr>) -> tensor<?xf32>
  return %v : tensor<?xf32>
}

// -----

// A function that must go to the upstream sparsifier but has a tensor in a
// layout #sparse_tensor cannot express is an error where that type is
// defined: composable layouts (parts) have no single #sparse_tensor encoding.
#hyb = #sparse_iter.composable<[#sparse_iter.part<rest, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>]>

// expected-error-re@+1 {{'negative_composable' needs the upstream sparsifier (it requested), but #sparse_iter.composable<{{.*}}> has no #sparse_tensor form: composable layouts have no #sparse_tensor form}}
func.func @negative_composable(%a: tensor<?x?xf32, #hyb>) attributes {sparse_iter.upstream = "requested"} {
  return
}

// -----

// The input is verified first: a bad sparse_iter layout is reported, not marked around.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)
