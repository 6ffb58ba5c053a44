// RUN: sparsecomp-opt %s | sparsecomp-opt | FileCheck %s
// RUN: sparsecomp-opt %s --mlir-print-op-generic | sparsecomp-opt | FileCheck %s
// Printing is a fixed point: printing the printed module changes nothing.
// RUN: sparsecomp-opt %s -o %t.1 && sparsecomp-opt %t.1 -o %t.2 && diff %t.1 %t.2

// Every sparse_iter attribute and op prints and parses back unchanged.

#unstructured = #sparse_iter.sparsity<unstructured, density = 0.01>
#nm = #sparse_iter.sparsity<nm[2, 4], density = 0.5>
#block = #sparse_iter.sparsity<block[16, 16], density = 0.1>
#ragged = #sparse_iter.sparsity<ragged>
#matmul_lhs = #sparse_iter.encoding<#unstructured, op_name = "linalg.matmul", operand = 0, element_types = [f32, f32, f32], indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]>

// CHECK-LABEL: func.func private @encodings
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.encoding<#sparse_iter.sparsity<unstructured, density = 0.01>, op_name = "linalg.matmul", operand = 0, element_types = [f32, f32, f32], indexing_maps = [#{{map[0-9]*}}, #{{map[0-9]*}}, #{{map[0-9]*}}]>>
// CHECK-SAME: tensor<8x8xf16, #sparse_iter.sparsity<nm[2, 4], density = 0.5>>
// CHECK-SAME: tensor<32x32xf32, #sparse_iter.sparsity<block[16, 16], density = 0.1>>
// CHECK-SAME: tensor<?x?xi32, #sparse_iter.sparsity<ragged>>
func.func private @encodings(tensor<?x?xf32, #matmul_lhs>, tensor<8x8xf16, #nm>,
                             tensor<32x32xf32, #block>, tensor<?x?xi32, #ragged>)

// One of each level format and property, every map shape, every option.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 64, crdWidth = 16}>
#dcsr = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed), crdWidth = 8}>
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 16 : dense, j floordiv 8 : compressed, i mod 16 : dense, j mod 8 : dense)}>
#coo3 = #sparse_iter.layout<{map = (i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique, soa), k : singleton(soa)), posWidth = 64, crdWidth = 64}>
#ell = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed_fixed), posWidth = 32, crdWidth = 32}>
#ell8 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed_fixed[8]), posWidth = 32, crdWidth = 32}>
#ragged_rows = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : dense_varied), posWidth = 32, crdWidth = 32}>
#loose = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : loose_compressed(nonordered)), posWidth = 32, crdWidth = 32}>
#nm24 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>
#shared = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32, indexGroup = "sddmm.s"}>

// CHECK-LABEL: func.func private @layouts
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 64, crdWidth = 16}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed, d1 : compressed), crdWidth = 8}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 16 : dense, d1 floordiv 8 : compressed, d0 mod 16 : dense, d1 mod 8 : dense)}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1, d2) -> (d0 : compressed(nonunique), d1 : singleton(nonunique, soa), d2 : singleton(soa)), posWidth = 64, crdWidth = 64}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed_fixed), posWidth = 32, crdWidth = 32}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed_fixed[8]), posWidth = 32, crdWidth = 32}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : dense_varied), posWidth = 32, crdWidth = 32}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : loose_compressed(nonordered)), posWidth = 32, crdWidth = 32}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>
// CHECK-SAME: #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32, indexGroup = "sddmm.s"}>
func.func private @layouts(tensor<?x?xf64, #csr>, tensor<?x?xf64, #csc>, tensor<?x?xf32, #dcsr>,
                           tensor<64x64xf32, #bsr>, tensor<?x?x?xf32, #coo3>,
                           tensor<?x?xf32, #ell>, tensor<?x?xf32, #ell8>, tensor<?x?xi32, #ragged_rows>,
                           tensor<?x?xf32, #loose>, tensor<?x?xf16, #nm24>, tensor<?x?xf32, #shared>)

// Composable layouts: hyb-style ELL buckets + CSR rest, BSR + CSR rest.
#ell1 = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed_fixed[1]), posWidth = 32, crdWidth = 32}>
#ell2 = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed_fixed[2]), posWidth = 32, crdWidth = 32}>
#hyb = #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 2, 0, 1], #ell1>, #sparse_iter.part<ell_bucket[1, 2, 1, 2], #ell2>, #sparse_iter.part<rest, #csr>]>
#bsr_csr = #sparse_iter.composable<[#sparse_iter.part<block_dense[16, 8, 32], #bsr>, #sparse_iter.part<rest, #csr>]>

// CHECK-LABEL: func.func private @composable
// CHECK-SAME: #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 2, 0, 1], #sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed, d1 : compressed_fixed[1]), posWidth = 32, crdWidth = 32}>>, #sparse_iter.part<ell_bucket[1, 2, 1, 2], #sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed, d1 : compressed_fixed[2]), posWidth = 32, crdWidth = 32}>>, #sparse_iter.part<rest, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>]>
// CHECK-SAME: #sparse_iter.composable<[#sparse_iter.part<block_dense[16, 8, 32], #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 16 : dense, d1 floordiv 8 : compressed, d0 mod 16 : dense, d1 mod 8 : dense)}>>, #sparse_iter.part<rest, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>]>
func.func private @composable(tensor<?x?xf32, #hyb>, tensor<?x?xf32, #bsr_csr>)

// Ops print in their assembly format; the generic form parses too.
// CHECK-LABEL: func.func @ops
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK: %[[S:.*]] = sparse_iter.set_encoding %[[X]] : tensor<?x?xf32> to tensor<?x?xf32, #sparse_iter.layout
// CHECK: %[[U:.*]] = sparse_iter.unset_encoding %[[S]] : tensor<?x?xf32, #sparse_iter.layout{{.*}}> to tensor<?x?xf32>
// CHECK: %[[T:.*]] = sparse_iter.sparsify %[[U]] with <threshold[0.001]> : tensor<?x?xf32> to tensor<?x?xf32, #sparse_iter.layout
// CHECK: sparse_iter.sparsify %[[T]] with <nm[2, 4]> : tensor<?x?xf32, #sparse_iter.layout{{.*}}> to tensor<?x?xf32, #sparse_iter.sparsity
func.func @ops(%x: tensor<?x?xf32>) -> tensor<?x?xf32, #nm> {
  %s = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %u = "sparse_iter.unset_encoding"(%s) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  %t = "sparse_iter.sparsify"(%u) {sparsifier = #sparse_iter.sparsifier<threshold[0.001]>}
      : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %n = "sparse_iter.sparsify"(%t) {sparsifier = #sparse_iter.sparsifier<nm[2, 4]>}
      : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #nm>
  return %n : tensor<?x?xf32, #nm>
}

// set_encoding may change one #sparse_iter encoding into another: a sparsity
// into an op encoding, a layout into another layout (a conversion).
#csc_conv = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>
// CHECK-LABEL: func.func @change_encoding
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.sparsity
// CHECK: %[[E:.*]] = sparse_iter.set_encoding %[[A]] : tensor<?x?xf32, #sparse_iter.sparsity{{.*}}> to tensor<?x?xf32, #sparse_iter.encoding
// CHECK: %[[L:.*]] = sparse_iter.set_encoding %{{.*}} : tensor<?x?xf32, #sparse_iter.layout{{.*}}> to tensor<?x?xf32, #sparse_iter.layout
func.func @change_encoding(%a: tensor<?x?xf32, #unstructured>, %c: tensor<?x?xf32, #csr>)
    -> (tensor<?x?xf32, #matmul_lhs>, tensor<?x?xf32, #csc_conv>) {
  %e = sparse_iter.set_encoding %a : tensor<?x?xf32, #unstructured> to tensor<?x?xf32, #matmul_lhs>
  %l = sparse_iter.set_encoding %c : tensor<?x?xf32, #csr> to tensor<?x?xf32, #csc_conv>
  return %e, %l : tensor<?x?xf32, #matmul_lhs>, tensor<?x?xf32, #csc_conv>
}

// The stage II access ops read and rebuild a sparse tensor's buffers.
// CHECK-LABEL: func.func @access
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout
// CHECK: sparse_iter.positions %[[A]][1] : {{.*}} -> tensor<?xi32>
// CHECK: sparse_iter.coordinates %[[A]][1] : {{.*}} -> tensor<?xi32>
// CHECK: %[[V:.*]] = sparse_iter.values %[[A]]
// CHECK: sparse_iter.with_values %[[A]], %[[V]]
func.func @access(%A: tensor<?x?xf32, #csr>) -> (tensor<?xi32>, tensor<?xi32>, tensor<?x?xf32, #csr>) {
  %p = sparse_iter.positions %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
  %c = sparse_iter.coordinates %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
  %v = sparse_iter.values %A : tensor<?x?xf32, #csr> -> tensor<?xf32>
  %w = sparse_iter.with_values %A, %v : tensor<?x?xf32, #csr>, tensor<?xf32> -> tensor<?x?xf32, #csr>
  return %p, %c, %w : tensor<?xi32>, tensor<?xi32>, tensor<?x?xf32, #csr>
}

// storage_size: the bytes of any tensor's buffers, encoded or not.
// CHECK-LABEL: func.func @storage_size
// CHECK: sparse_iter.storage_size %{{.*}} : tensor<?x?xf32, #sparse_iter.layout
// CHECK: sparse_iter.storage_size %{{.*}} : tensor<4x?xf64>
func.func @storage_size(%A: tensor<?x?xf32, #csr>, %D: tensor<4x?xf64>) -> (index, index) {
  %a = sparse_iter.storage_size %A : tensor<?x?xf32, #csr>
  %d = sparse_iter.storage_size %D : tensor<4x?xf64>
  return %a, %d : index, index
}

// assemble builds a sparse tensor from its buffers and dimension sizes.
// CHECK-LABEL: func.func @assemble
// CHECK: sparse_iter.assemble positions(%{{.*}} : tensor<?xi32>) coordinates(%{{.*}} : tensor<?xi32>) values(%{{.*}} : tensor<?xf32>) sizes(%{{.*}}, %{{.*}}) -> tensor<?x?xf32, #sparse_iter.layout
func.func @assemble(%p: tensor<?xi32>, %c: tensor<?xi32>, %v: tensor<?xf32>, %m: index, %n: index) -> tensor<?x?xf32, #csr> {
  %t = sparse_iter.assemble positions(%p : tensor<?xi32>) coordinates(%c : tensor<?xi32>)
      values(%v : tensor<?xf32>) sizes(%m, %n) -> tensor<?x?xf32, #csr>
  return %t : tensor<?x?xf32, #csr>
}

// get_part reads one part of a composable tensor.
// CHECK-LABEL: func.func @get_part
// CHECK: sparse_iter.get_part %{{.*}}[0]
func.func @get_part(%A: tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<rest, #csr>]>>) -> tensor<?x?xf32, #csr> {
  %p = sparse_iter.get_part %A[0] : tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<rest, #csr>]>> -> tensor<?x?xf32, #csr>
  return %p : tensor<?x?xf32, #csr>
}

// Targets live in a module attribute; functions pick one by name.
// CHECK-LABEL: module @devices
// CHECK-SAME: sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16, m16n8k8], sparse_mma_shapes = [m16n8k16, m16n8k32]>, host = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 0>}
// CHECK: func.func private @on_gpu() attributes {sparse_iter.target = "gpu"}
module @devices attributes {sparse_iter.targets = {
    host = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 0>,
    gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16, m16n8k8], sparse_mma_shapes = [m16n8k16, m16n8k32]>}} {
  func.func private @on_gpu() attributes {sparse_iter.target = "gpu"}
}

// A CUDA target's shape lists may be left out (every shape its sm has), or given
// one at a time; an empty list is kept as written.
// CHECK-LABEL: module @short_cuda
// CHECK-SAME: a = #sparse_iter.cuda<sm_90>
// CHECK-SAME: b = #sparse_iter.cuda<sm_80, sparse_mma_shapes = [m16n8k16]>
// CHECK-SAME: c = #sparse_iter.cuda<sm_80, mma_shapes = []>
module @short_cuda attributes {sparse_iter.targets = {
    a = #sparse_iter.cuda<sm_90>,
    b = #sparse_iter.cuda<sm_80, sparse_mma_shapes = [m16n8k16]>,
    c = #sparse_iter.cuda<sm_80, mma_shapes = []>}} {
}

// A CPU target may name the vendor's cores its code is tuned for; printed
// only where set, after the other fields, whatever order they came in.
// CHECK-LABEL: module @tuned
// CHECK-SAME: sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx512f], vector_bits = 512, threads = 2, tune = amd>}
module @tuned attributes {sparse_iter.targets = {
    host = #sparse_iter.cpu<x86_64, tune = amd, features = [avx512f], threads = 2, vector_bits = 512>}} {}
