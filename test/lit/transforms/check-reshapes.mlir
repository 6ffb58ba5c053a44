// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-check-reshapes | FileCheck %s --enable-var-scope

// A sparse vector expanded to ? x 4: the dynamic size times 4 must be the
// source's size, or the program reports both and exits.
#SV = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

// CHECK: llvm.mlir.global private constant @{{[a-z_0-9]+}}("{{.*}}check-reshapes.mlir:[[@LINE+12]]:8: error: 'expand' expands dimension 0 of tensor<?xf64, {{.*}}>, of size %lld, into sizes whose product is %lld {{.*}}\0A\00")
// CHECK: func.func private @[[$FATAL:[a-z_0-9]+]](%{{.*}}: index, %{{.*}}: index) {
// CHECK-LABEL: func.func @expand
// CHECK-SAME: (%[[A:.*]]: tensor<?xf64, {{.*}}>, %[[M:.*]]: index)
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[P:.*]] = arith.muli %[[M]], %[[C4]] : index
// CHECK: %[[N:.*]] = tensor.dim %[[A]], %{{.*}}
// CHECK: %[[BAD:.*]] = arith.cmpi ne, %[[P]], %[[N]] : index
// CHECK: scf.if %[[BAD]] {
// CHECK-NEXT: func.call @[[$FATAL]](%[[N]], %[[P]]) : (index, index) -> ()
// CHECK: tensor.expand_shape %[[A]]
func.func @expand(%a: tensor<?xf64, #SV>, %m: index) -> tensor<?x4xf64, #CSR> {
  %r = tensor.expand_shape %a [[0, 1]] output_shape [%m, 4] : tensor<?xf64, #SV> into tensor<?x4xf64, #CSR>
  return %r : tensor<?x4xf64, #CSR>
}

// -----

// Dense tensors and all-static groups are left alone (the verifier checks a
// static group against a static source).
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#SV = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed) }>

// CHECK-LABEL: func.func @untouched
// CHECK-NOT: scf.if
// CHECK: tensor.expand_shape
// CHECK-NOT: scf.if
// CHECK: tensor.expand_shape
// CHECK: return
func.func @untouched(%d: tensor<?xf64>, %m: index, %s: tensor<12xf64, #SV>) -> (tensor<?x4xf64>, tensor<3x4xf64, #CSR>) {
  %r = tensor.expand_shape %d [[0, 1]] output_shape [%m, 4] : tensor<?xf64> into tensor<?x4xf64>
  %t = tensor.expand_shape %s [[0, 1]] output_shape [3, 4] : tensor<12xf64, #SV> into tensor<3x4xf64, #CSR>
  return %r, %t : tensor<?x4xf64>, tensor<3x4xf64, #CSR>
}
