// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-set-encodings | FileCheck %s --enable-var-scope
// The pass is idempotent.
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-set-encodings --sparse-iter-set-encodings | FileCheck %s --enable-var-scope

#sp = #sparse_iter.sparsity<unstructured, density = 0.01>

// A named op: its indexing maps are the ones linalg-generalize-named-ops writes.
// CHECK-DAG: #[[$MA:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$MB:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[$MC:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @spmm
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>>, %[[B:.*]]: tensor<?x?xf32>, %[[C:.*]]: tensor<?x?xf32>)
// CHECK: %[[E:.*]] = sparse_iter.set_encoding %[[A]] : tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.01>> to tensor<?x?xf32, #sparse_iter.encoding<#sparse_iter.sparsity<unstructured, density = 0.01>, op_name = "linalg.matmul", operand = 0, element_types = [f32, f32, f32], indexing_maps = [#[[$MA]], #[[$MB]], #[[$MC]]]>>
// CHECK: %[[R:.*]] = linalg.matmul ins(%[[E]], %[[B]] : tensor<?x?xf32, #sparse_iter.encoding<{{.*}}>>, tensor<?x?xf32>) outs(%[[C]] : tensor<?x?xf32>)
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: return %[[R]]
func.func @spmm(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

#sp = #sparse_iter.sparsity<unstructured, density = 0.01>

// A sparse init: the result takes the init's encoding, and its users get the
// sparsity type back through a second set_encoding (encoding -> sparsity).
// CHECK-LABEL: func.func @sparse_result
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf64, #[[SP:sparse_iter.sparsity<.*>]]>, %[[X:.*]]: tensor<?x?xf64>)
// CHECK: %[[EA:.*]] = sparse_iter.set_encoding %[[A]] {{.*}} to tensor<?x?xf64, #sparse_iter.encoding<#[[SP]], op_name = "linalg.generic", operand = 0, element_types = [f64, f64, f64], indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}]>>
// CHECK: %[[EO:.*]] = sparse_iter.set_encoding %[[A]] {{.*}} to tensor<?x?xf64, #[[OUT:sparse_iter.encoding<#sparse_iter.sparsity<.*>, op_name = "linalg.generic", operand = 2, .*>]]>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[EA]], %[[X]] : {{.*}}) outs(%[[EO]] : tensor<?x?xf64, #[[OUT]]>)
// CHECK: } -> tensor<?x?xf64, #[[OUT]]>
// CHECK: %[[BACK:.*]] = sparse_iter.set_encoding %[[R]] : tensor<?x?xf64, #[[OUT]]> to tensor<?x?xf64, #[[SP]]>
// CHECK: return %[[BACK]]
func.func @sparse_result(%a: tensor<?x?xf64, #sp>, %x: tensor<?x?xf64>) -> tensor<?x?xf64, #sp> {
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %x : tensor<?x?xf64, #sp>, tensor<?x?xf64>) outs(%a : tensor<?x?xf64, #sp>) {
  ^bb0(%av: f64, %xv: f64, %o: f64):
    %p = arith.mulf %av, %xv : f64
    linalg.yield %p : f64
  } -> tensor<?x?xf64, #sp>
  return %0 : tensor<?x?xf64, #sp>
}

// -----

#nm = #sparse_iter.sparsity<nm[2, 4], density = 0.5>
#vec = #sparse_iter.sparsity<unstructured, density = 0.1>

// Element types list every operand, scalars included; both sparse operands
// of one op get their own operand index.
// CHECK-LABEL: func.func @matvec
// CHECK: sparse_iter.set_encoding %{{.*}} {{.*}} to tensor<8x16xf16, #sparse_iter.encoding<#sparse_iter.sparsity<nm[2, 4], density = 0.5>, op_name = "linalg.matvec", operand = 0, element_types = [f16, f16, f16], indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}]>>
// CHECK: sparse_iter.set_encoding %{{.*}} {{.*}} to tensor<16xf16, #sparse_iter.encoding<#sparse_iter.sparsity<unstructured, density = 0.1>, op_name = "linalg.matvec", operand = 1, element_types = [f16, f16, f16], indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}]>>
// CHECK: linalg.matvec
// CHECK-LABEL: func.func @fill
// CHECK: sparse_iter.set_encoding %{{.*}} {{.*}} to tensor<16xf16, #sparse_iter.encoding<#sparse_iter.sparsity<unstructured, density = 0.1>, op_name = "linalg.fill", operand = 1, element_types = [f16, f16], indexing_maps = [#{{.*}}, #{{.*}}]>>
// CHECK: linalg.fill
func.func @matvec(%a: tensor<8x16xf16, #nm>, %x: tensor<16xf16, #vec>, %y: tensor<8xf16>) -> tensor<8xf16> {
  %0 = linalg.matvec ins(%a, %x : tensor<8x16xf16, #nm>, tensor<16xf16, #vec>) outs(%y : tensor<8xf16>) -> tensor<8xf16>
  return %0 : tensor<8xf16>
}
func.func @fill(%v: f16, %x: tensor<16xf16, #vec>) {
  %0 = linalg.fill ins(%v : f16) outs(%x : tensor<16xf16, #vec>) -> tensor<16xf16, #vec>
  return
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// Layouts and plain tensors are left alone; so are non-linalg users.
// CHECK-LABEL: func.func @negative_layouts
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: linalg.matmul
// CHECK-LABEL: func.func @negative_not_linalg
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: tensor.dim
func.func @negative_layouts(%a: tensor<?x?xf32, #csr>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
func.func @negative_not_linalg(%a: tensor<?x?xf32, #sparse_iter.sparsity<ragged>>) -> index {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %a, %c0 : tensor<?x?xf32, #sparse_iter.sparsity<ragged>>
  return %d : index
}
