// RUN: sparsecomp-opt %s | sparsecomp-opt | FileCheck %s
// RUN: sparsecomp-opt %s --mlir-print-op-generic | sparsecomp-opt | FileCheck %s
// Printing is a fixed point: printing the printed module changes nothing.
// RUN: sparsecomp-opt %s -o %t.1 && sparsecomp-opt %t.1 -o %t.2 && diff %t.1 %t.2

// Every sparse_iter attribute and op prints and parses back unchanged.

#unstructured = #sparse_iter.sparsity<"unstructured", array<i64>, 0.01>
#nm = #sparse_iter.sparsity<"nm", array<i64: 2, 4>, 0.5>
#block = #sparse_iter.sparsity<"block", array<i64: 16, 16>, 0.1>
#ragged = #sparse_iter.sparsity<"ragged", array<i64>, 1.0>
#matmul_lhs = #sparse_iter.encoding<#unstructured, "linalg.matmul", 0, [f32, f32, f32],
  [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]>

// The block and n:m maps print as aliases at the top.
// CHECK-DAG: #[[BSR_MAP:map[0-9]*]] = affine_map<(d0, d1) -> (d0 floordiv 16, d1 floordiv 8, d0 mod 16, d1 mod 8)>
// CHECK-DAG: #[[NM_MAP:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 floordiv 4, d1 mod 4)>

// CHECK-LABEL: func.func private @encodings
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.encoding<#sparse_iter.sparsity<"unstructured", array<i64>, 1.000000e-02 : f64>, "linalg.matmul", 0 : i64, [f32, f32, f32], [#{{map[0-9]*}}, #{{map[0-9]*}}, #{{map[0-9]*}}]>>
// CHECK-SAME: tensor<8x8xf16, #sparse_iter.sparsity<"nm", array<i64: 2, 4>, 5.000000e-01 : f64>>
// CHECK-SAME: tensor<32x32xf32, #sparse_iter.sparsity<"block", array<i64: 16, 16>, 1.000000e-01 : f64>>
// CHECK-SAME: tensor<?x?xi32, #sparse_iter.sparsity<"ragged", array<i64>, 1.000000e+00 : f64>>
func.func private @encodings(tensor<?x?xf32, #matmul_lhs>, tensor<8x8xf16, #nm>,
                             tensor<32x32xf32, #block>, tensor<?x?xi32, #ragged>)

// One of each level format and property, every map shape, every option.
#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#csc = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (j, i)>, 64, 16, {}>
#dcsr = #sparse_iter.layout<["compressed_varied", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 0, 8, {}>
#bsr = #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"],
  affine_map<(i, j) -> (i floordiv 16, j floordiv 8, i mod 16, j mod 8)>, 0, 0, {}>
#coo3 = #sparse_iter.layout<["compressed_varied(nonunique)", "singleton(nonunique, soa)", "singleton(soa)"],
  affine_map<(i, j, k) -> (i, j, k)>, 64, 64, {}>
#ell = #sparse_iter.layout<["dense_fixed", "compressed_fixed"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#ell8 = #sparse_iter.layout<["dense_fixed", "compressed_fixed[8]"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#ragged_rows = #sparse_iter.layout<["dense_fixed", "dense_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#loose = #sparse_iter.layout<["dense_fixed", "loose_compressed(nonordered)"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#nm24 = #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[2,4]"],
  affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 8, {nm_metadata = "mma_sp_m16n8k16"}>
#shared = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32,
  {index_group = "sddmm.s"}>

// CHECK-LABEL: func.func private @layouts
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied"], #{{map[0-9]*}}, 64 : i64, 16 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["compressed_varied", "compressed_varied"], #{{map[0-9]*}}, 0 : i64, 8 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], #[[BSR_MAP]], 0 : i64, 0 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["compressed_varied(nonunique)", "singleton(nonunique, soa)", "singleton(soa)"], #{{map[0-9]*}}, 64 : i64, 64 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_fixed"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_fixed[8]"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "dense_varied"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "loose_compressed(nonordered)"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[2,4]"], #[[NM_MAP]], 32 : i64, 8 : i64, {nm_metadata = "mma_sp_m16n8k16"}>
// CHECK-SAME: #sparse_iter.layout<["dense_fixed", "compressed_varied"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {index_group = "sddmm.s"}>
func.func private @layouts(tensor<?x?xf64, #csr>, tensor<?x?xf64, #csc>, tensor<?x?xf32, #dcsr>,
                           tensor<64x64xf32, #bsr>, tensor<?x?x?xf32, #coo3>,
                           tensor<?x?xf32, #ell>, tensor<?x?xf32, #ell8>, tensor<?x?xi32, #ragged_rows>,
                           tensor<?x?xf32, #loose>, tensor<?x?xf16, #nm24>, tensor<?x?xf32, #shared>)

// Composable layouts: hyb-style ELL buckets + CSR rest, BSR + CSR rest.
#ell1 = #sparse_iter.layout<["compressed_varied", "compressed_fixed[1]"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#ell2 = #sparse_iter.layout<["compressed_varied", "compressed_fixed[2]"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#hyb = #sparse_iter.composable<[
  #sparse_iter.part<"ell_bucket", array<i64: 0, 2, 0, 1>, #ell1>,
  #sparse_iter.part<"ell_bucket", array<i64: 1, 2, 1, 2>, #ell2>,
  #sparse_iter.part<"rest", array<i64>, #csr>]>
#bsr_csr = #sparse_iter.composable<[
  #sparse_iter.part<"block_dense", array<i64: 16, 8, 32>, #bsr>,
  #sparse_iter.part<"rest", array<i64>, #csr>]>

// CHECK-LABEL: func.func private @composable
// CHECK-SAME: #sparse_iter.composable<[#sparse_iter.part<"ell_bucket", array<i64: 0, 2, 0, 1>, #sparse_iter.layout<["compressed_varied", "compressed_fixed[1]"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>>, #sparse_iter.part<"ell_bucket", array<i64: 1, 2, 1, 2>, #sparse_iter.layout<["compressed_varied", "compressed_fixed[2]"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>>, #sparse_iter.part<"rest", array<i64>, #sparse_iter.layout<["dense_fixed", "compressed_varied"], #{{map[0-9]*}}, 32 : i64, 32 : i64, {}>>]>
// CHECK-SAME: #sparse_iter.composable<[#sparse_iter.part<"block_dense", array<i64: 16, 8, 32>, #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], #[[BSR_MAP]], 0 : i64, 0 : i64, {}>>, #sparse_iter.part<"rest"
func.func private @composable(tensor<?x?xf32, #hyb>, tensor<?x?xf32, #bsr_csr>)

// Ops print in their assembly format; the generic form parses too.
// CHECK-LABEL: func.func @ops
// CHECK-SAME: (%[[X:.*]]: tensor<?x?xf32>)
// CHECK: %[[S:.*]] = sparse_iter.set_encoding %[[X]] : tensor<?x?xf32> to tensor<?x?xf32, #sparse_iter.layout
// CHECK: %[[U:.*]] = sparse_iter.unset_encoding %[[S]] : tensor<?x?xf32, #sparse_iter.layout{{.*}}> to tensor<?x?xf32>
// CHECK: %[[T:.*]] = sparse_iter.sparsify %[[U]] with <"threshold", array<f64: 1.000000e-03>> : tensor<?x?xf32> to tensor<?x?xf32, #sparse_iter.layout
// CHECK: sparse_iter.sparsify %[[T]] with <"nm", array<f64: 2.000000e+00, 4.000000e+00>> : tensor<?x?xf32, #sparse_iter.layout{{.*}}> to tensor<?x?xf32, #sparse_iter.sparsity
func.func @ops(%x: tensor<?x?xf32>) -> tensor<?x?xf32, #nm> {
  %s = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %u = "sparse_iter.unset_encoding"(%s) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  %t = "sparse_iter.sparsify"(%u) {sparsifier = #sparse_iter.sparsifier<"threshold", array<f64: 1.0e-3>>}
      : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %n = "sparse_iter.sparsify"(%t) {sparsifier = #sparse_iter.sparsifier<"nm", array<f64: 2.0, 4.0>>}
      : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #nm>
  return %n : tensor<?x?xf32, #nm>
}

// set_encoding may change one #sparse_iter encoding into another: a sparsity
// into an op encoding, a layout into another layout (a conversion).
#csc_conv = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (j, i)>, 32, 32, {}>
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
func.func @get_part(%A: tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"rest", array<i64>, #csr>]>>) -> tensor<?x?xf32, #csr> {
  %p = sparse_iter.get_part %A[0] : tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"rest", array<i64>, #csr>]>> -> tensor<?x?xf32, #csr>
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
