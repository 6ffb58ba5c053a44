// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-mark-upstream

// Other sparse_iter ops have no upstream counterpart.
#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

func.func @negative_values(%a: tensor<?x?xf32, #csr>) -> tensor<?xf32> attributes {sparse_iter.upstream = "requested"} {
  // expected-error@+1 {{'negative_values' needs the upstream sparsifier (it requested), but 'sparse_iter.values' has no upstream counterpart}}
  %v = "sparse_iter.values"(%a) : (tensor<?x?xf32, #csr>) -> tensor<?xf32>
  return %v : tensor<?xf32>
}

// -----

// A function that must go to the upstream sparsifier but has a tensor in a
// layout #sparse_tensor cannot express is an error where that type is
// defined: composable layouts (parts) have no single #sparse_tensor encoding.
#hyb = #sparse_iter.composable<[#sparse_iter.part<"rest", array<i64>, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>]>

// expected-error-re@+1 {{'negative_composable' needs the upstream sparsifier (it requested), but #sparse_iter.composable<{{.*}}> has no #sparse_tensor form: composable layouts have no #sparse_tensor form}}
func.func @negative_composable(%a: tensor<?x?xf32, #hyb>) attributes {sparse_iter.upstream = "requested"} {
  return
}

// -----

// The input is verified first: a bad sparse_iter layout is reported, not marked around.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<["sparse"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// The upstream sparsifier stores blocks whole: a blocked tensor whose static
// size is not a multiple of its block (a 3x4 BSR 2x2 matrix) is refused where
// the type is defined (here: the function's arguments).
#bsr = #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], affine_map<(i, j) -> (i floordiv 2, j floordiv 2, i mod 2, j mod 2)>, 32, 32, {}>

// expected-error@+1 {{'negative_partial_block' needs the upstream sparsifier (it requested), but dimension 0 of tensor<3x4xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], affine_map<(d0, d1) -> (d0 floordiv 2, d1 floordiv 2, d0 mod 2, d1 mod 2)>, 32 : i64, 32 : i64, {}>> has size 3, not a multiple of its block 2: the upstream sparsifier stores whole blocks only}}
func.func @negative_partial_block(%a: tensor<3x4xf32, #bsr>) -> tensor<3x4xf32, #bsr> attributes {sparse_iter.upstream = "requested"} {
  return %a : tensor<3x4xf32, #bsr>
}

// -----

// A blocked size neither static nor an argument's dimension cannot be checked
// before a call.
#bsr = #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], affine_map<(i, j) -> (i floordiv 2, j floordiv 2, i mod 2, j mod 2)>, 32, 32, {}>

func.func @negative_untraced_size(%n: index) -> tensor<?x?xf32, #bsr> attributes {sparse_iter.upstream = "requested"} {
  // expected-error-re@+1 {{'negative_untraced_size' needs the upstream sparsifier (it requested), but dimension 0 of {{.*}} has a size that is neither static nor a public function argument's dimension, so it cannot be checked to be a multiple of its block 2 (the upstream sparsifier stores whole blocks only)}}
  %e = tensor.empty(%n, %n) : tensor<?x?xf32, #bsr>
  return %e : tensor<?x?xf32, #bsr>
}

// -----

// Upstream inserts into an n:m level like a compressed one, without the
// group's padding: building an n:m value there is refused.
#nm = #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[2,4]"], affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 32, {}>

func.func @negative_build_nm(%m: tensor<?x?xf32>) -> tensor<?x?xf32, #nm> attributes {sparse_iter.upstream = "requested"} {
  // expected-error@+1 {{'negative_build_nm' needs the upstream sparsifier (it requested), but 'sparse_iter.set_encoding' builds an n:m (structured[2,4]) value, which the upstream sparsifier stores without the group's padding (malformed); build it densely or in CSR, or compute it with sparse_iter (same structure as an n:m input)}}
  %s = "sparse_iter.set_encoding"(%m) : (tensor<?x?xf32>) -> tensor<?x?xf32, #nm>
  return %s : tensor<?x?xf32, #nm>
}
