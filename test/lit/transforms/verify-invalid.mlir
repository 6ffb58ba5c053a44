// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(sparse-iter-verify)'

// Each violation is reported once, at its first use.
// expected-error@+1 {{pos_width must be one of 0, 8, 16, 32, 64, got 31}}
func.func private @first(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 31, 32, {}>>)
func.func private @again(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 31, 32, {}>>)

// -----

// Problems in different attributes of one op are all reported (the first
// problem of each attribute).
// expected-error@+2 {{unknown level format 'weird'}}
// expected-error@+1 {{crd_width must be one of 0, 8, 16, 32, 64, got 7}}
func.func private @two(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "weird"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>,
                       tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 7, {}>>)
