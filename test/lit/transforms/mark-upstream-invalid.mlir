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

// -----

// A BSR tensor whose static shape is not whole blocks is held unblocked (as
// CSR) in an upstream function: reading its storage would read the CSR
// storage, so it is an error. (Of dynamic shape, it keeps its blocks.)
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense) }>

func.func @negative_block_storage(%a: tensor<3x4xf64, #BSR>) -> index attributes {sparse_iter.upstream = "requested"} {
  // expected-error@+1 {{'negative_block_storage' needs the upstream sparsifier (it requested), but 'sparse_tensor.number_of_entries' reads the storage of tensor<3x4xf64, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense) }>>, which is held unblocked there (as CSR}}
  %n = sparse_tensor.number_of_entries %a : tensor<3x4xf64, #BSR>
  return %n : index
}

// -----

// A dynamic-shape BSR type cast from a static partial one is held unblocked
// with it (a cast joins its two types), so its storage cannot be read either.
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense) }>

func.func @negative_cast_block_storage(%a: tensor<3x4xf64, #BSR>) -> index attributes {sparse_iter.upstream = "requested"} {
  %d = tensor.cast %a : tensor<3x4xf64, #BSR> to tensor<?x?xf64, #BSR>
  // expected-error@+1 {{'sparse_tensor.print' reads the storage of tensor<?x?xf64, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense) }>>, which is held unblocked there (as CSR}}
  sparse_tensor.print %d : tensor<?x?xf64, #BSR>
  %c0 = arith.constant 0 : index
  return %c0 : index
}

// -----

// n:m tensors are held as CSR whatever their shape (upstream mishandles n:m
// levels, not only partial groups): their storage cannot be read.
#NM = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]) }>

func.func @negative_nm_storage(%a: tensor<?x?xf64, #NM>) -> memref<?xf64> attributes {sparse_iter.upstream = "requested"} {
  // expected-error@+1 {{'negative_nm_storage' needs the upstream sparsifier (it requested), but 'sparse_tensor.values' reads the storage of tensor<?x?xf64, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]) }>>, which is held unblocked there (as CSR}}
  %v = sparse_tensor.values %a : tensor<?x?xf64, #NM> to memref<?xf64>
  return %v : memref<?xf64>
}
