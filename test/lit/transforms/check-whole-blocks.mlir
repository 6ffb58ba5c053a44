// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-check-whole-blocks | FileCheck %s --enable-var-scope

// A dynamic-shape BSR tensor converted from a tensor: the source's sizes must
// be multiples of the blocks, or the program reports the shape and exits.
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, i mod 2 : dense, j mod 3 : dense) }>

// CHECK: llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32
// CHECK: llvm.func @exit(i32)
// CHECK: llvm.mlir.global private constant @{{[a-z_0-9]+}}("{{.*}}check-whole-blocks.mlir:[[@LINE+16]]:8: error: 'convert' holds tensor<?x?xf64, {{.*}}> in whole 2x3 blocks, {{.*}} its shape at run time, %lldx%lld, does not divide into them\0A\00")
// CHECK: func.func private @[[$FATAL:[a-z_0-9]+]](%{{.*}}: index, %{{.*}}: index) {
// CHECK: llvm.call @dprintf(
// CHECK: llvm.call @exit(
// CHECK-LABEL: func.func @convert
// CHECK-SAME: (%[[D:.*]]: tensor<?x?xf64>)
// CHECK: %[[M:.*]] = tensor.dim %[[D]], %{{.*}} : tensor<?x?xf64>
// CHECK: %[[N:.*]] = tensor.dim %[[D]], %{{.*}} : tensor<?x?xf64>
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[RM:.*]] = arith.remui %[[M]], %[[C2]] : index
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[RN:.*]] = arith.remui %[[N]], %[[C3]] : index
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: func.call @[[$FATAL]](%[[M]], %[[N]]) : (index, index) -> ()
// CHECK: sparse_tensor.convert %[[D]]
func.func @convert(%d: tensor<?x?xf64>) -> tensor<?x?xf64, #BSR> {
  %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #BSR>
  return %a : tensor<?x?xf64, #BSR>
}

// -----

// tensor.empty and bufferization.alloc_tensor: their dynamic sizes (a static
// one is a constant); the second dimension is not blocked, but is reported.
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j : compressed, i mod 2 : dense) }>

// CHECK-LABEL: func.func @empty
// CHECK-SAME: (%[[M:.*]]: index)
// CHECK: %[[C5:.*]] = arith.constant 5 : index
// CHECK: arith.remui %[[M]], %{{.*}} : index
// CHECK: scf.if
// CHECK-NEXT: func.call @{{.*}}(%[[M]], %[[C5]])
// CHECK: tensor.empty(%[[M]])
// CHECK: arith.remui %[[M]], %{{.*}} : index
// CHECK: scf.if
// CHECK-NEXT: func.call @{{.*}}(%[[M]], %{{.*}})
// CHECK: bufferization.alloc_tensor(%[[M]])
func.func @empty(%m: index) -> (tensor<?x5xf64, #BSR>, tensor<?x5xf64, #BSR>) {
  %e = tensor.empty(%m) : tensor<?x5xf64, #BSR>
  %a = bufferization.alloc_tensor(%m) : tensor<?x5xf64, #BSR>
  return %e, %a : tensor<?x5xf64, #BSR>, tensor<?x5xf64, #BSR>
}

// -----

// Left alone: static whole-block shapes, CSR, a tensor made from a checked
// one (insert, copy), and n:m levels (held as CSR before this pass).
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#NM = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]) }>

// CHECK-LABEL: func.func @negative_left_alone
// CHECK-NOT: scf.if
// CHECK-NOT: func.call
// CHECK: return
func.func @negative_left_alone(%s: tensor<4x4xf64>, %d: tensor<?x?xf64>, %b: tensor<?x?xf64, #BSR>, %v: f64, %i: index)
    -> (tensor<4x4xf64, #BSR>, tensor<?x?xf64, #CSR>, tensor<?x?xf64, #BSR>, tensor<?x?xf64, #BSR>, tensor<?x?xf64, #NM>) {
  %a = sparse_tensor.convert %s : tensor<4x4xf64> to tensor<4x4xf64, #BSR>
  %c = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #CSR>
  %x = tensor.insert %v into %b[%i, %i] : tensor<?x?xf64, #BSR>
  %y = bufferization.alloc_tensor() copy(%b) : tensor<?x?xf64, #BSR>
  %n = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #NM>
  return %a, %c, %x, %y, %n : tensor<4x4xf64, #BSR>, tensor<?x?xf64, #CSR>, tensor<?x?xf64, #BSR>, tensor<?x?xf64, #BSR>, tensor<?x?xf64, #NM>
}
