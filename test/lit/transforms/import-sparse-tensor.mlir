// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-import-sparse-tensor | FileCheck %s --enable-var-scope

// Encodings as MLIR's own sparse_tensor tests write them import to the
// equivalent #sparse_iter layouts.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>
#DCSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed, d1 : compressed) }>
#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)) }>
#COO3 = #sparse_tensor.encoding<{ map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique), d2 : singleton) }>
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, i mod 2 : dense, j mod 3 : dense) }>
#NV_24 = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]) }>
#Loose = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : loose_compressed(nonordered)) }>
#Widths = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 8, crdWidth = 16 }>

// CHECK: func.func private @formats
// CHECK-SAME: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>>
// CHECK-SAME: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed)}>>
// CHECK-SAME: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed, d1 : compressed)}>>
// CHECK-SAME: tensor<?x?xf64, #sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa))}>>
// CHECK-SAME: tensor<?x?x?xf32, #sparse_iter.layout<{map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique), d2 : singleton)}>>
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 3 : compressed, d0 mod 2 : dense, d1 mod 3 : dense)}>>
// CHECK-SAME: tensor<?x?xf16, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4])}>>
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : loose_compressed(nonordered))}>>
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 8, crdWidth = 16}>>
// CHECK-NOT: sparse_tensor
func.func private @formats(tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSC>, tensor<?x?xf64, #DCSR>,
                           tensor<?x?xf64, #COO>, tensor<?x?x?xf32, #COO3>, tensor<?x?xf32, #BSR>,
                           tensor<?x?xf16, #NV_24>, tensor<?x?xf32, #Loose>, tensor<?x?xf32, #Widths>)

// -----

// A kernel: signature, block arguments and results all change.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#trait_spmv = {
  indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
  iterator_types = ["parallel", "reduction"]
}

// CHECK-LABEL: func.func @spmv
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf64, #[[L:sparse_iter.layout<.*>]]>, %[[X:.*]]: tensor<?xf64>, %[[Y:.*]]: tensor<?xf64>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[X]] : tensor<?x?xf64, #[[L]]>, tensor<?xf64>) outs(%[[Y]] : tensor<?xf64>)
// CHECK: return %[[R]]
func.func @spmv(%a: tensor<?x?xf64, #CSR>, %x: tensor<?xf64>, %y: tensor<?xf64>) -> tensor<?xf64> {
  %0 = linalg.generic #trait_spmv ins(%a, %x : tensor<?x?xf64, #CSR>, tensor<?xf64>) outs(%y : tensor<?xf64>) {
  ^bb0(%av: f64, %xv: f64, %yv: f64):
    %p = arith.mulf %av, %xv : f64
    %s = arith.addf %yv, %p : f64
    linalg.yield %s : f64
  } -> tensor<?xf64>
  return %0 : tensor<?xf64>
}

// CHECK-LABEL: func.func @scale
// CHECK-SAME: -> tensor<4x8xf32, #sparse_iter.layout
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32, #sparse_iter.layout
func.func @scale(%a: tensor<4x8xf32, #CSR>) -> tensor<4x8xf32, #CSR> {
  %e = tensor.empty() : tensor<4x8xf32, #CSR>
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32, #CSR>) outs(%e : tensor<4x8xf32, #CSR>) {
  ^bb0(%v: f32, %o: f32):
    %d = arith.addf %v, %v : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32, #CSR>
  return %0 : tensor<4x8xf32, #CSR>
}

// -----

// Functions using sparse_tensor ops keep their encodings, and so do their
// callers and callees; the rest of the module is imported.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#Slice = #sparse_tensor.encoding<{ map = (d0 : #sparse_tensor<slice(0, 4, 1)>, d1 : #sparse_tensor<slice(0, 8, 1)>) -> (d0 : dense, d1 : compressed) }>
#Ones = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), explicitVal = 1.0 : f32 }>

// CHECK-LABEL: func.func @convert
// CHECK-SAME: sparse_iter.upstream = "uses 'sparse_tensor.convert', which sparse_iter has no counterpart for"
// CHECK: sparse_tensor.convert {{.*}} to tensor<4x8xf32, #sparse{{[0-9]*}}>
func.func @convert(%d: tensor<4x8xf32>) -> tensor<4x8xf32, #CSR> {
  %0 = sparse_tensor.convert %d : tensor<4x8xf32> to tensor<4x8xf32, #CSR>
  return %0 : tensor<4x8xf32, #CSR>
}

// CHECK-LABEL: func.func @caller
// CHECK-SAME: sparse_iter.upstream = "calls or is called by 'convert', which uses 'sparse_tensor.convert'
// CHECK: call @convert
func.func @caller(%d: tensor<4x8xf32>) -> tensor<4x8xf32, #CSR> {
  %0 = call @convert(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32, #CSR>
  return %0 : tensor<4x8xf32, #CSR>
}

// CHECK-LABEL: func.func private @sliced
// CHECK-SAME: sparse_iter.upstream = "has the encoding {{.*}}, which cannot be imported: dimension slices
func.func private @sliced(tensor<4x8xf32, #Slice>)

// CHECK-LABEL: func.func private @ones
// CHECK-SAME: sparse_iter.upstream = "has the encoding {{.*}}, which cannot be imported: explicitVal/implicitVal have no sparse_iter form"
func.func private @ones(tensor<4x8xf32, #Ones>)

// CHECK-LABEL: func.func private @dense_only
// CHECK-NOT: sparse_iter.upstream
func.func private @dense_only(tensor<4x8xf32>)

// CHECK-LABEL: func.func private @imported
// CHECK-SAME: #sparse_iter.layout
// CHECK-NOT: sparse_iter.upstream
func.func private @imported(tensor<4x8xf32, #CSR>)

// -----

// A dealloc_tensor of a sparse tensor is erased where the function is imported (the
// lowering frees its buffers); a dense one's stays.

#DCSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed, d1 : compressed) }>

// CHECK-LABEL: func.func @freed
// CHECK-NOT:     bufferization.dealloc_tensor %{{.*}} : tensor<4x5xf64, #sparse_iter
// CHECK:         bufferization.dealloc_tensor %{{.*}} : tensor<3xf64>
// CHECK:         return
func.func @freed(%d: tensor<3xf64>) {
  %t = tensor.empty() : tensor<4x5xf64, #DCSR>
  bufferization.dealloc_tensor %t : tensor<4x5xf64, #DCSR>
  bufferization.dealloc_tensor %d : tensor<3xf64>
  return
}
