// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-gpu-kernel-bodies

// Like every sparsecomp pass it verifies sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

// A declaration with a kernel's name and other types: the kernel would not fit
// its calls.
// expected-error@+1 {{'__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n2x8' names a 2:4 tensor-core kernel of type (memref<?xf16>, memref<?xi32>, memref<?x?xf16>, memref<?x?xf32>, memref<?x?xf32>) -> (), but is declared (memref<?xf32>) -> ()}}
func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n2x8(memref<?xf32>)
