// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-layouts,sparsecomp-cpu-upstream)' \
// RUN:   | FileCheck %s

// A function using sparse_tensor ops goes to the upstream sparsifier at the
// end of stage I; the upstream stage brings it back in the LLVM dialect,
// with the C interface the runtime calls.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
// CHECK-LABEL: llvm.func @nnz(
// CHECK-SAME:    sparse_iter.abi
// CHECK:       llvm.func @_mlir_ciface_nnz(
func.func @nnz(%a: tensor<?x?xf64, #CSR>) -> index {
  %n = sparse_tensor.number_of_entries %a : tensor<?x?xf64, #CSR>
  return %n : index
}
