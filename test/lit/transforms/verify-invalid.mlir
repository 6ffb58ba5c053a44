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

// -----

// A function named as a C function that compiled code calls would take those
// calls (math.exp on f64 is a call to libm's exp): defining one is an error.
// expected-error@+1 {{function @exp has the name of the C library's exp, which compiled code calls; rename it (e.g. @exp_kernel)}}
func.func @exp(%x: f64) -> f64 {
  %e = math.exp %x : f64
  return %e : f64
}

// -----

// Declaring one is how a program calls it.
func.func private @expf(f32) -> f32
func.func @uses_expf(%x: f32) -> f32 {
  %e = func.call @expf(%x) : (f32) -> f32
  return %e : f32
}
