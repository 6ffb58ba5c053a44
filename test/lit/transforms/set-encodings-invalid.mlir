// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-set-encodings
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-set-encodings='target=cpu' 2>&1 | FileCheck %s --check-prefix=OPTION

// OPTION: error: pass 'sparse-iter-set-encodings' has no option 'target' (options: none)

// The pass cannot fail on well-formed input (every linalg structured op has
// indexing maps); malformed sparse_iter input is refused before it runs.

// expected-error@+1 {{unknown sparsity kind 'diagonal'; expected one of unstructured, nm, block, ragged}}
func.func @negative_bad_sparsity(%a: tensor<?x?xf32, #sparse_iter.sparsity<diagonal>>,
                                 %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sparse_iter.sparsity<diagonal>>, tensor<?x?xf32>)
                     outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

#s = #sparse_iter.sparsity<unstructured>
// expected-error@+1 {{operand 3 is out of range for 3 indexing maps}}
func.func private @negative_bad_encoding(tensor<?x?xf32, #sparse_iter.encoding<#s, op_name = "linalg.matmul", operand = 3, element_types = [f32, f32, f32], indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]>>)
