// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-decompose-formats | FileCheck %s

// A layout name as the rule: the argument takes hyb:1:2's parts (ELL buckets
// of widths 1 and 2, then a CSR rest); the attribute is gone, the other
// argument's attributes stay.
// CHECK-LABEL: func.func @by_name
// CHECK-SAME: %{{.*}}: tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 1, 0, 1]
// CHECK-SAME: #sparse_iter.part<ell_bucket[0, 1, 1, 2]
// CHECK-SAME: #sparse_iter.part<rest
// CHECK-SAME: %{{.*}}: tensor<?x?xf32> {sparse_iter.keep}
// CHECK-NOT: sparse_iter.decompose
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x?xf32, #sparse_iter.composable<
#sparse = #sparse_iter.sparsity<unstructured>
func.func @by_name(%a: tensor<?x?xf32, #sparse> {sparse_iter.decompose = "hyb:1:2"},
                   %b: tensor<?x?xf32> {sparse_iter.keep}, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sparse>, tensor<?x?xf32>)
                     outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// A rule as an attribute, on an argument whose type the result shares (SDDMM):
// both take it, and the function type follows.
// CHECK-LABEL: func.func @shared_with_the_result
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense)}>>
// CHECK-SAME: -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense
// CHECK-NOT: arg_attrs
// CHECK: tensor.empty{{.*}} : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @shared_with_the_result(
    %s: tensor<?x?xf32, #csr> {sparse_iter.decompose = #sparse_iter.layout<{map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense)}>},
    %m: index, %n: index) -> tensor<?x?xf32, #csr> {
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #csr>
  return %e : tensor<?x?xf32, #csr>
}

// -----

// Two arguments of one type (SpGEMM's operands, upstream syntax) with the same
// rule, here 32-bit indices: both take it, and so does the result of that type.
// CHECK-LABEL: func.func @same_rule_on_a_shared_type
// CHECK-SAME: (%{{.*}}: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>, %{{.*}}: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>)
// CHECK-SAME: -> tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NOT: arg_attrs
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @same_rule_on_a_shared_type(
    %a: tensor<?x?xf64, #CSR> {sparse_iter.decompose = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>},
    %b: tensor<?x?xf64, #CSR> {sparse_iter.decompose = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>}
    ) -> tensor<?x?xf64, #CSR> {
  %c = linalg.matmul ins(%a, %b : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>)
                     outs(%a : tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #CSR>
  return %c : tensor<?x?xf64, #CSR>
}

// -----

// One of two arguments of one type with a rule (SpGEMM called with A in 64-bit
// indices, B in the program's 32): A alone takes it, for its uses (tensor.dim,
// the matmul's input) take any encoding; B and the result keep theirs.
// CHECK-LABEL: func.func @one_operand_alone
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 64, crdWidth = 64}>>, %[[B:.*]]: tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 32, crdWidth = 32}>>)
// CHECK-SAME: -> tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 32, crdWidth = 32}>>
// CHECK: tensor.dim %[[A]], %{{.*}} : tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 64
// CHECK: tensor.empty({{.*}}) : tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 32
// CHECK: linalg.matmul ins(%[[A]], %[[B]] : tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 64, crdWidth = 64}>>, tensor<?x?xf32, #sparse_iter.layout<{{.*}}posWidth = 32
#csr32 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @one_operand_alone(
    %a: tensor<?x?xf32, #csr32> {sparse_iter.decompose = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 64, crdWidth = 64}>},
    %b: tensor<?x?xf32, #csr32>) -> tensor<?x?xf32, #csr32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32, #csr32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32, #csr32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #csr32>
  %c = linalg.matmul ins(%a, %b : tensor<?x?xf32, #csr32>, tensor<?x?xf32, #csr32>)
                     outs(%e : tensor<?x?xf32, #csr32>) -> tensor<?x?xf32, #csr32>
  return %c : tensor<?x?xf32, #csr32>
}

// -----

// A function passing its operand to a private helper: the helper, which no
// other function calls, is retyped with it (its call would not match).
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense
// CHECK-LABEL: func.func @passes_it_on
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense
// CHECK: call @helper(%{{.*}}, %{{.*}}) : (tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func private @helper(%a: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.matvec ins(%a, %x : tensor<?x?xf32, #csr>, tensor<?xf32>)
                     outs(%x : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @passes_it_on(
    %a: tensor<?x?xf32, #csr> {sparse_iter.decompose = #sparse_iter.layout<{map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense)}>},
    %x: tensor<?xf32>) -> tensor<?xf32> {
  %r = call @helper(%a, %x) : (tensor<?x?xf32, #csr>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
