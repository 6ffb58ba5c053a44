// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(sparse-iter-verify)'

// Each violation is reported once, at its first use.
// expected-error@+1 {{singleton level 1 must follow a nonunique compressed, loose_compressed or singleton level}}
func.func private @first(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : singleton)}>>)
func.func private @again(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : singleton)}>>)

// -----

// Problems in different attributes of one op are all reported (the first
// problem of each attribute).
// expected-error@+2 {{the levels before structured level 2 must be dense}}
// expected-error@+1 {{unknown nmMetadata 'bitmask'}}
func.func private @two(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : compressed, j floordiv 4 : dense, j mod 4 : structured[2, 4])}>>,
                       tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), nmMetadata = bitmask}>>)
