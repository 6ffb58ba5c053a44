// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-soa-coo | FileCheck %s --enable-var-scope

// An AoS COO argument: signature, recorded tensor signature, values and the
// caller's call all get singleton(soa); CSR is left alone.
// CHECK-DAG: #[[$SOA:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)){{.*}} }>
// CHECK-LABEL: func.func @matvec
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #[[$SOA]]>, %{{.*}}: tensor<?xf32>, %{{.*}}: tensor<?xf32>) -> tensor<?xf32>
// CHECK-SAME: sparse_iter.tensor_signature = (tensor<?x?xf32, #[[$SOA]]>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
// CHECK: linalg.matvec ins(%{{.*}}, %{{.*}} : tensor<?x?xf32, #[[$SOA]]>, tensor<?xf32>)
// CHECK-LABEL: func.func @caller
// CHECK: sparse_tensor.convert %{{.*}} : tensor<2x2xf32, #{{.*}}> to tensor<2x2xf32, #{{.*}}>
// CHECK: call @matvec(%{{.*}}) : (tensor<?x?xf32, #[[$SOA]]>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
#COO = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @matvec(%a: tensor<?x?xf32, #COO>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32>
    attributes {sparse_iter.tensor_signature = (tensor<?x?xf32, #COO>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>} {
  %r = linalg.matvec ins(%a, %x : tensor<?x?xf32, #COO>, tensor<?xf32>) outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @caller(%c: tensor<2x2xf32, #CSR>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %a = sparse_tensor.convert %c : tensor<2x2xf32, #CSR> to tensor<2x2xf32, #COO>
  %d = tensor.cast %a : tensor<2x2xf32, #COO> to tensor<?x?xf32, #COO>
  %r = call @matvec(%d, %x, %y) : (tensor<?x?xf32, #COO>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// Three levels: both singletons become soa.
// CHECK: #[[$SOA3:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique, soa), d2 : singleton(soa)){{.*}} }>
// CHECK-LABEL: func.func @rank3
// CHECK-SAME: tensor<2x3x4xf64, #[[$SOA3]]>
func.func @rank3(%a: tensor<2x3x4xf64, #sparse_tensor.encoding<{ map = (i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique), k : singleton) }>>) {
  return
}

// -----

// A function that reads the AoS coordinates buffer keeps AoS, and so does its caller.
// CHECK: #[[$AOS:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>
// CHECK-LABEL: func.func @negative_coordinates_buffer
// CHECK-SAME: tensor<4x4xf32, #[[$AOS]]>
// CHECK: sparse_tensor.coordinates_buffer
// CHECK-LABEL: func.func @negative_caller
// CHECK-SAME: tensor<4x4xf32, #[[$AOS]]>
#AOS = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>
func.func @negative_coordinates_buffer(%a: tensor<4x4xf32, #AOS>) -> memref<?xindex> {
  %c = sparse_tensor.coordinates_buffer %a : tensor<4x4xf32, #AOS> to memref<?xindex>
  return %c : memref<?xindex>
}
func.func @negative_caller(%a: tensor<4x4xf32, #AOS>) -> memref<?xindex> {
  %c = call @negative_coordinates_buffer(%a) : (tensor<4x4xf32, #AOS>) -> memref<?xindex>
  return %c : memref<?xindex>
}

// -----

// A slice of a COO tensor: its encoding (dimension slices) cannot be retyped, and
// the sparsifier asserts that a slice's encoding is its source's, so the function
// keeps AoS (it retyped the source only: an assertion in SparseTensorCodegen).
#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>
#SLICE = #sparse_tensor.encoding<{ map = (d0 : #sparse_tensor<slice(1, 4, 1)>, d1 : #sparse_tensor<slice(1, 4, 2)>) -> (d0 : compressed(nonunique), d1 : singleton) }>

// CHECK: #[[$AOS:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>
// CHECK-LABEL: func.func @negative_slice
// CHECK-SAME: (%{{.*}}: tensor<8x8xf64, #[[$AOS]]>)
// CHECK: tensor.extract_slice {{.*}} : tensor<8x8xf64, #[[$AOS]]> to
func.func @negative_slice(%a: tensor<8x8xf64, #COO>) -> tensor<4x4xf64, #SLICE> {
  %s = tensor.extract_slice %a[1, 1][4, 4][1, 2] : tensor<8x8xf64, #COO> to tensor<4x4xf64, #SLICE>
  return %s : tensor<4x4xf64, #SLICE>
}

// -----

// sparse_tensor.print shows the storage, the AoS region as one interleaved crd
// buffer: the function keeps AoS (it printed crd[0] and crd[1] apart, unlike
// upstream), as do 3-level COO tensors.
// CHECK-DAG: #[[$AOS:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>
// CHECK-DAG: #[[$AOS3:.*]] = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique), d2 : singleton) }>
// CHECK-LABEL: func.func @negative_print
// CHECK: tensor.insert {{.*}} : tensor<4x5xf64, #[[$AOS]]>
// CHECK: sparse_tensor.print {{.*}} : tensor<4x5xf64, #[[$AOS]]>
// CHECK-LABEL: func.func @negative_print3
// CHECK-SAME: tensor<2x3x4xf64, #[[$AOS3]]>
// CHECK: sparse_tensor.print {{.*}} : tensor<2x3x4xf64, #[[$AOS3]]>
#COO = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>
#COO3 = #sparse_tensor.encoding<{ map = (i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique), k : singleton) }>
func.func @negative_print() {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %f1 = arith.constant 1.0 : f64
  %e = tensor.empty() : tensor<4x5xf64, #COO>
  %i = tensor.insert %f1 into %e[%c0, %c3] : tensor<4x5xf64, #COO>
  %t = sparse_tensor.load %i hasInserts : tensor<4x5xf64, #COO>
  sparse_tensor.print %t : tensor<4x5xf64, #COO>
  return
}
func.func @negative_print3(%a: tensor<2x3x4xf64, #COO3>) {
  sparse_tensor.print %a : tensor<2x3x4xf64, #COO3>
  return
}
