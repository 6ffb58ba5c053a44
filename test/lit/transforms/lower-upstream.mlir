// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-lower-upstream)' \
// RUN:   | FileCheck %s --enable-var-scope

// A marked function comes back in the LLVM dialect with sparsecomp's ABI
// (buffers + sizes behind _mlir_ciface_<name>) recorded in sparse_iter.abi;
// an unmarked one is left alone, and their shared declarations are merged.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#map = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// CHECK-LABEL: func.func @native
// CHECK:         memref.alloc
func.func @native(%n: index) -> memref<?xf64> {
  %m = memref.alloc(%n) : memref<?xf64>
  return %m : memref<?xf64>
}

// CHECK-LABEL: llvm.func @rowsum(
// CHECK-SAME:    sparse_iter.abi = "{{.*}}d1 : compressed
// CHECK:       llvm.func @_mlir_ciface_rowsum
func.func @rowsum(%a: tensor<?x?xf64, #CSR>, %o: tensor<?xf64>) -> tensor<?xf64>
    attributes {sparse_iter.upstream = "requested by the test"} {
  %0 = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
    ins(%a : tensor<?x?xf64, #CSR>) outs(%o : tensor<?xf64>) {
  ^bb0(%x: f64, %acc: f64):
    %s = arith.addf %x, %acc : f64
    linalg.yield %s : f64
  } -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// -----

// Without marked functions the module is unchanged.
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT:    return
func.func @untouched() {
  return
}
