// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-lower-buffers | FileCheck %s --enable-var-scope

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// An encoded argument becomes pos1, crd1, values and two sizes, in place;
// the access ops and tensor.dim read them. The ABI keeps the original
// signature and the size symbols the loops assumed equal.
// CHECK-LABEL: func.func @reads
// CHECK-SAME: (%[[POS:.*]]: tensor<?xi32>, %[[CRD:.*]]: tensor<?xi32>, %[[VAL:.*]]: tensor<?xf32>, %[[M:.*]]: index, %[[N:.*]]: index, %[[X:.*]]: tensor<?xf32>)
// CHECK-SAME: -> (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index)
// CHECK-SAME: sparse_iter.abi = "{\22args\22:[{\22kind\22:\22sparse\22,\22dtype\22:\22float32\22,\22shape\22:[null,\22s0\22]
// CHECK-SAME: \22buffers\22:{{\[\[}}\22pos1\22,\22int32\22],[\22crd1\22,\22int32\22],[\22values\22,\22float32\22]]}
// CHECK-SAME: {\22kind\22:\22dense\22,\22dtype\22:\22float32\22,\22shape\22:[\22s0\22]}
// CHECK-NOT: sparse_iter.same_sizes
// CHECK: return %[[POS]], %[[CRD]], %[[VAL]], %[[N]]
func.func @reads(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index)
    attributes {sparse_iter.same_sizes = [array<i64: 0, 1, 1, 0>]} {
  %c1 = arith.constant 1 : index
  %p = "sparse_iter.positions"(%A) {level = 1 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  %c = "sparse_iter.coordinates"(%A) {level = 1 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  %v = "sparse_iter.values"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?xf32>
  %n = tensor.dim %A, %c1 : tensor<?x?xf32, #csr>
  return %p, %c, %v, %n : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// A sparse result with the structure of an argument returns its index
// buffers and sizes with the new values. Private functions get no ABI; calls
// pass and receive flattened values.
// CHECK-LABEL: func.func private @scale
// CHECK-SAME: (%[[POS:.*]]: tensor<?xi32>, %[[CRD:.*]]: tensor<?xi32>, %[[VAL:.*]]: tensor<?xf32>, %[[M:.*]]: index, %[[N:.*]]: index, %[[NEW:.*]]: tensor<?xf32>)
// CHECK-NOT: sparse_iter.abi
// CHECK: return %[[POS]], %[[CRD]], %[[NEW]], %[[M]], %[[N]]
func.func private @scale(%A: tensor<?x?xf32, #csr>, %v: tensor<?xf32>) -> tensor<?x?xf32, #csr> {
  %r = "sparse_iter.with_values"(%A, %v) : (tensor<?x?xf32, #csr>, tensor<?xf32>) -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// CHECK-LABEL: func.func @caller
// CHECK-SAME: (%[[P:.*]]: tensor<?xi32>, %[[C:.*]]: tensor<?xi32>, %[[V:.*]]: tensor<?xf32>, %[[M:.*]]: index, %[[N:.*]]: index, %[[W:.*]]: tensor<?xf32>)
// CHECK-SAME: sparse_iter.abi
// CHECK: %[[R:.*]]:5 = call @scale(%[[P]], %[[C]], %[[V]], %[[M]], %[[N]], %[[W]])
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3, %[[R]]#4
func.func @caller(%A: tensor<?x?xf32, #csr>, %w: tensor<?xf32>) -> tensor<?x?xf32, #csr> {
  %r = call @scale(%A, %w) : (tensor<?x?xf32, #csr>, tensor<?xf32>) -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#dcsr = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed), posWidth = 64}>
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense), posWidth = 32, crdWidth = 32}>

// Only levels that store buffers contribute parameters; width 0 is i64.
// CHECK-LABEL: func.func private @decl
// CHECK-SAME: (tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xi64>, tensor<?xf64>, index, index,
// CHECK-SAME: tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index, index)
func.func private @decl(tensor<?x?xf64, #dcsr>, tensor<?x?xf32, #bsr>)

// -----

#dcsr = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed), posWidth = 64, crdWidth = 32}>

// sparse_iter.assemble passes its operands on as the result's buffers, in
// SparseTensor.buffers() order (pos0, crd0, pos1, crd1, values) and sizes.
// CHECK-LABEL: func.func @assemble
// CHECK-SAME: (%[[P0:.*]]: tensor<?xi64>, %[[P1:.*]]: tensor<?xi64>, %[[C0:.*]]: tensor<?xi32>, %[[C1:.*]]: tensor<?xi32>, %[[V:.*]]: tensor<?xf32>, %[[M:.*]]: index, %[[N:.*]]: index)
// CHECK-NEXT: return %[[P0]], %[[C0]], %[[P1]], %[[C1]], %[[V]], %[[M]], %[[N]] : tensor<?xi64>, tensor<?xi32>, tensor<?xi64>, tensor<?xi32>, tensor<?xf32>, index, index
func.func @assemble(%p0: tensor<?xi64>, %p1: tensor<?xi64>, %c0: tensor<?xi32>, %c1: tensor<?xi32>, %v: tensor<?xf32>, %m: index, %n: index) -> tensor<?x?xf32, #dcsr> {
  %t = "sparse_iter.assemble"(%p0, %p1, %c0, %c1, %v, %m, %n) {operandSegmentSizes = array<i32: 2, 2, 1, 2>}
      : (tensor<?xi64>, tensor<?xi64>, tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index, index) -> tensor<?x?xf32, #dcsr>
  return %t : tensor<?x?xf32, #dcsr>
}

// -----

#ell = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed_fixed[2]), posWidth = 32, crdWidth = 32}>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#hyb = #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 1, 0, 2], #ell>, #sparse_iter.part<rest, #csr>]>

// A composable argument is every part's buffers in order, then the sizes;
// sparse_iter.get_part picks one part's buffers.
// CHECK-LABEL: func.func @parts
// CHECK-SAME: (%[[P0:.*]]: tensor<?xi32>, %[[C0:.*]]: tensor<?xi32>, %[[C1:.*]]: tensor<?xi32>, %[[V:.*]]: tensor<?xf32>, %[[RP:.*]]: tensor<?xi32>, %[[RC:.*]]: tensor<?xi32>, %[[RV:.*]]: tensor<?xf32>, %[[M:.*]]: index, %[[N:.*]]: index)
// CHECK-SAME: part0.pos0
// CHECK-NEXT: return %[[RP]], %[[RC]], %[[RV]], %[[M]], %[[N]]
func.func @parts(%A: tensor<?x?xf32, #hyb>) -> tensor<?x?xf32, #csr> {
  %p = "sparse_iter.get_part"(%A) {index = 1 : i64} : (tensor<?x?xf32, #hyb>) -> tensor<?x?xf32, #csr>
  return %p : tensor<?x?xf32, #csr>
}

// -----

// storage_size: the lengths of the buffers times their element bytes (4 for
// i32 positions and coordinates and f32 values); for a dense tensor, its
// dimensions times the element bytes.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// CHECK-LABEL: func.func @storage_size
// CHECK-SAME: (%[[POS:.*]]: tensor<?xi32>, %[[CRD:.*]]: tensor<?xi32>, %[[VAL:.*]]: tensor<?xf32>, %{{.*}}: index, %{{.*}}: index, %[[D:.*]]: tensor<3x?xf64>)
// CHECK: %[[NP:.*]] = tensor.dim %[[POS]]
// CHECK: %[[BP:.*]] = arith.muli %[[NP]], %[[C4:.*]] : index
// CHECK: %[[NC:.*]] = tensor.dim %[[CRD]]
// CHECK: arith.muli %[[NC]]
// CHECK: %[[NV:.*]] = tensor.dim %[[VAL]]
// CHECK: arith.muli %[[NV]]
// CHECK: %[[SUM:.*]] = arith.addi
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[R:.*]] = tensor.dim %[[D]], %{{.*}} : tensor<3x?xf64>
// CHECK: %[[T0:.*]] = arith.muli %[[C8]], %[[R]]
// CHECK: %[[CC:.*]] = tensor.dim %[[D]], %{{.*}} : tensor<3x?xf64>
// CHECK: %[[T1:.*]] = arith.muli %[[T0]], %[[CC]]
// CHECK: return %[[SUM]], %[[T1]]
func.func @storage_size(%a: tensor<?x?xf32, #csr>, %d: tensor<3x?xf64>) -> (index, index) {
  %n = sparse_iter.storage_size %a : tensor<?x?xf32, #csr>
  %m = sparse_iter.storage_size %d : tensor<3x?xf64>
  return %n, %m : index, index
}
