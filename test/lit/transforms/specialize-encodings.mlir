// The stage-I pipeline: attach op encodings, resolve them, fold what is left.
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-set-encodings --sparse-iter-specialize-encodings --sparse-iter-fold-encodings | FileCheck %s --enable-var-scope
// Specialization alone reads the uses itself and gives the same layouts.
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-specialize-encodings | FileCheck %s --enable-var-scope
// After the pipeline no #sparsity/#encoding and no set/unset round trip is left.
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-set-encodings --sparse-iter-specialize-encodings --sparse-iter-fold-encodings | FileCheck %s --check-prefix=CLEAN --implicit-check-not='#sparse_iter.sparsity' --implicit-check-not='#sparse_iter.encoding' --implicit-check-not=unset_encoding
// target=host overrides the module's targets and function choices.
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-specialize-encodings='target=host' | FileCheck %s --check-prefix=HOST --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-specialize-encodings='densify=true' | FileCheck %s --check-prefix=DENSE --enable-var-scope

// The example program: sparsity-typed arguments feeding linalg.matmul get CSR.
#sp = #sparse_iter.sparsity<unstructured, density = 0.01>

// CHECK-LABEL: func.func @spmm_sparsity
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>, %[[B:.*]]: tensor<?x?xf32>, %[[C:.*]]: tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: %[[R:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<?x?xf32, #sparse_iter.layout<{{.*}}>>, tensor<?x?xf32>) outs(%[[C]] : tensor<?x?xf32>)
// CHECK: return %[[R]]
// CLEAN-LABEL: func.func @spmm_sparsity
func.func @spmm_sparsity(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// CSC where the outer parallel loop (m) indexes the matrix's second dimension.
#sp = #sparse_iter.sparsity<unstructured, density = 0.01>
#ta = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]

// CHECK-LABEL: func.func @transposed
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: linalg.matmul
// CLEAN-LABEL: func.func @transposed
func.func @transposed(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul indexing_maps = #ta ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// Two uses that resolve differently: the first wins, the second gets a
// conversion (the set_encoding that set-encodings placed before the use, or
// one right after the definition where the input has none).
// CHECK-LABEL: func.func @two_uses
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-DAG: linalg.matmul ins(%[[A]], %{{.*}} : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-DAG: %[[CONV:.*]] = sparse_iter.set_encoding %[[A]] : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>> to tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK: linalg.matmul indexing_maps = [{{.*}}] ins(%[[CONV]], %{{.*}} : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>
// CLEAN-LABEL: func.func @two_uses
func.func @two_uses(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  %1 = linalg.matmul indexing_maps = #ta ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0, %1 : tensor<?x?xf32>, tensor<?x?xf32>
}

// A sparse result keeps its init's layout (CSR); a later transposed use of it
// gets a conversion.
// CHECK-LABEL: func.func @chain
// CHECK: %[[P:.*]] = linalg.matmul ins({{.*}}) outs(%{{.*}} : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>) -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NEXT: %[[CONV:.*]] = sparse_iter.set_encoding %[[P]] : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>> to tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NEXT: linalg.matmul indexing_maps = [{{.*}}] ins(%[[CONV]],
// CLEAN-LABEL: func.func @chain
func.func @chain(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32, #sp>, %d: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
  %1 = linalg.matmul indexing_maps = #ta ins(%0, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%d : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}

// A first use through tensor.cast or a call decides as well.
// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK: %[[C:.*]] = tensor.cast %[[A]] : {{.*}} to tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: linalg.matmul indexing_maps = [{{.*}}] ins(%[[C]],
// CLEAN-LABEL: func.func @cast
func.func @cast(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = tensor.cast %a : tensor<?x?xf32, #sp> to tensor<?x?xf32, #sp>
  %1 = linalg.matmul indexing_maps = #ta ins(%0, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}
// CHECK-LABEL: func.func @wrapper
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NEXT: call @transposed(%[[A]],
// CLEAN-LABEL: func.func @wrapper
func.func @wrapper(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = call @transposed(%a, %b, %c) : (tensor<?x?xf32, #sp>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// Results, declarations and recursion: the sparsity alone decides (CSR).
// CHECK-LABEL: func.func @ident
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>) -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NEXT: return %[[A]]
// CHECK-LABEL: func.func private @external
// CHECK-SAME: (tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>) -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-LABEL: func.func @rec
// CHECK: call @rec(%{{.*}}) : (tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>) -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CLEAN-LABEL: func.func @ident
// CLEAN-LABEL: func.func @rec
func.func @ident(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> {
  return %a : tensor<?x?xf32, #sp>
}
func.func private @external(tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
func.func @rec(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> {
  %0 = call @rec(%a) : (tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
  %1 = call @external(%0) : (tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
  return %1 : tensor<?x?xf32, #sp>
}

// A hand-written #encoding resolves from the use it records.
// CHECK-LABEL: func.func @user_encoding
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
func.func @user_encoding(%a: tensor<?x?xf32, #sparse_iter.encoding<#sp, op_name = "linalg.matmul", operand = 0, element_types = [f32, f32, f32], indexing_maps = #ta>>) {
  return
}

// -----

// One of each sparsity kind, and ranks 1 and 3.
#block = #sparse_iter.sparsity<block[4, 8], density = 0.1>
#nm = #sparse_iter.sparsity<nm[2, 4], density = 0.5>
#ragged = #sparse_iter.sparsity<ragged>
#sp = #sparse_iter.sparsity<unstructured, density = 0.01>

// CHECK-LABEL: func.func private @kinds
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 8 : compressed, d0 mod 4 : dense, d1 mod 8 : dense), posWidth = 32, crdWidth = 32}>>
// CHECK-SAME: tensor<8x16xf16, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32}>>
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed_fixed), posWidth = 32, crdWidth = 32}>>
// CHECK-SAME: tensor<?xf32, #sparse_iter.layout<{map = (d0) -> (d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-SAME: tensor<?x?x?xf32, #sparse_iter.layout<{map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed), posWidth = 32, crdWidth = 32}>>
// CLEAN-LABEL: func.func private @kinds
func.func private @kinds(tensor<?x?xf32, #block>, tensor<8x16xf16, #nm>, tensor<?x?xf32, #ragged>,
                         tensor<?xf32, #sp>, tensor<?x?x?xf32, #sp>)

// 64-bit positions when the static sizes may hold more than 2**31 - 1
// entries, 64-bit coordinates when a compressed level is that long.
// CHECK-LABEL: func.func private @widths
// CHECK-SAME: tensor<3000000000x4xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32}>>
// CHECK-SAME: tensor<60000x60000xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 32}>>
// CHECK-SAME: tensor<?x3000000000xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 64}>>
// CHECK-SAME: tensor<40000x40000xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CLEAN-LABEL: func.func private @widths
func.func private @widths(tensor<3000000000x4xf32, #sp>, tensor<60000x60000xf32, #sp>,
                          tensor<?x3000000000xf32, #sp>, tensor<40000x40000xf32, #sp>)

// -----

#sp = #sparse_iter.sparsity<unstructured, density = 0.01>
#ta = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]

// Batched CSR for batch_matmul's rank-3 operand.
// CHECK-LABEL: func.func @batched
// CHECK-SAME: tensor<?x?x?xf32, #sparse_iter.layout<{map = (d0, d1, d2) -> (d0 : dense, d1 : dense, d2 : compressed), posWidth = 32, crdWidth = 32}>>
// CLEAN-LABEL: func.func @batched
func.func @batched(%a: tensor<?x?x?xf32, #sp>, %b: tensor<?x?x?xf32>, %c: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
  %0 = linalg.batch_matmul ins(%a, %b : tensor<?x?x?xf32, #sp>, tensor<?x?x?xf32>) outs(%c : tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  return %0 : tensor<?x?x?xf32>
}

// A sparse result: the init (tensor.empty) takes its first use's layout (CSR
// for the output), the result its init's, and the return needs no conversion.
// CHECK-LABEL: func.func @sparse_result
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>, %{{.*}}: tensor<?x?xf32>, %{{.*}}: index, %{{.*}}: index) -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NOT: sparse_iter.set_encoding
// CHECK: %[[R:.*]] = linalg.matmul {{.*}} outs(%[[E]] : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>) -> tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NEXT: return %[[R]]
// CLEAN-LABEL: func.func @sparse_result
func.func @sparse_result(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %m: index, %n: index) -> tensor<?x?xf32, #sp> {
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #sp>
  %0 = linalg.matmul indexing_maps = #ta ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
  return %0 : tensor<?x?xf32, #sp>
}

// A sparsified value takes its first use's layout.
// CHECK-LABEL: func.func @sparsify
// CHECK: sparse_iter.sparsify %{{.*}} {{.*}} to tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-NOT: sparse_iter.set_encoding
// CLEAN-LABEL: func.func @sparsify
func.func @sparsify(%d: tensor<?x?xf32>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = "sparse_iter.sparsify"(%d) {sparsifier = #sparse_iter.sparsifier<threshold[0.001]>} : (tensor<?x?xf32>) -> tensor<?x?xf32, #sp>
  %0 = linalg.matmul indexing_maps = #ta ins(%s, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Several targets: each function gets its own target's layouts, and data
// crossing a call between targets is converted in the caller, once, right
// after the value is defined.
#sp = #sparse_iter.sparsity<unstructured, density = 0.01>
#nm = #sparse_iter.sparsity<nm[2, 4], density = 0.5>
#ta = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]

// CHECK-LABEL: func.func @on_gpu
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK-LABEL: func.func @on_cpu
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK: %[[CONV:.*]] = sparse_iter.set_encoding %[[A]] : tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>> to tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
// CHECK: %[[P:.*]] = linalg.matmul
// CHECK: call @on_gpu(%[[CONV]], %{{.*}}, %[[P]])
// 2:4 f16 on a GPU with the m16n8k16 sparse MMA shape: the mma.sp metadata the
// 2:4 tensor-core kernel reads (its shape, though the target lists k32 too).
// CHECK-LABEL: func.func @mma_sp
// CHECK-SAME: tensor<16x32xf16, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>>
// CLEAN-LABEL: func.func @on_gpu
// CLEAN-LABEL: func.func @on_cpu
// CLEAN-LABEL: func.func @mma_sp
// HOST-LABEL: func.func @on_gpu
// HOST-SAME: (%{{.*}}: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
// HOST-LABEL: func.func @on_cpu
// HOST-NOT: sparse_iter.set_encoding
// HOST: call @on_gpu(%arg0,
// HOST-LABEL: func.func @mma_sp
// HOST-SAME: structured[2, 4]), posWidth = 32, crdWidth = 32}>>
module attributes {sparse_iter.targets = {
    cpu = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 0>,
    gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32, m16n8k16]>}} {
  func.func @on_gpu(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {sparse_iter.target = "gpu"} {
    %0 = linalg.matmul indexing_maps = #ta ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
  func.func @on_cpu(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {sparse_iter.target = "cpu"} {
    %0 = linalg.matmul indexing_maps = #ta ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    %1 = call @on_gpu(%a, %b, %0) : (tensor<?x?xf32, #sp>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    return %1 : tensor<?x?xf32>
  }
  func.func @mma_sp(%a: tensor<16x32xf16, #nm>, %b: tensor<32x8xf16>, %c: tensor<16x8xf16>) -> tensor<16x8xf16>
      attributes {sparse_iter.target = "gpu"} {
    %0 = linalg.matmul ins(%a, %b : tensor<16x32xf16, #nm>, tensor<32x8xf16>) outs(%c : tensor<16x8xf16>) -> tensor<16x8xf16>
    return %0 : tensor<16x8xf16>
  }
}

// -----

// densify=true: a known density of at least 0.5 becomes dense; 1.0 means
// unknown and stays sparse. Without densify, both are CSR.
// CHECK-LABEL: func.func private @densify
// CHECK-SAME: (tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed){{.*}}}>>, tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed){{.*}}}>>)
// CLEAN-LABEL: func.func private @densify
// DENSE-LABEL: func.func private @densify
// DENSE-SAME: (tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : dense){{.*}}}>>, tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed){{.*}}}>>)
func.func private @densify(tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.6>>,
                           tensor<?x?xf32, #sparse_iter.sparsity<unstructured>>)

// -----

// An op may name its own target: its operands take that target's layouts
// (CUDA keeps CSR for a transposed read, the CPU function reads CSC). The
// value crosses once: one conversion, right after its definition, shared by
// both GPU ops.
#sp = #sparse_iter.sparsity<unstructured>
#tr = affine_map<(m, n, k) -> (k, m)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#out = affine_map<(m, n, k) -> (m, n)>
module attributes {sparse_iter.targets = {
    cpu = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32]>}} {
  // CHECK-LABEL: func.func @op_affinity
  // CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed), posWidth = 32, crdWidth = 32}>>
  // CHECK-NEXT: %[[CONV:.*]] = sparse_iter.set_encoding %[[A]] {{.*}} to tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>>
  // CHECK-NEXT: %[[C0:.*]] = linalg.matmul {{.*}} ins(%[[A]],
  // CHECK-NEXT: %[[C1:.*]] = linalg.matmul {{.*}} {sparse_iter.target = "gpu"} ins(%[[CONV]],
  // CHECK-NEXT: linalg.matmul {{.*}} {sparse_iter.target = "gpu"} ins(%[[CONV]],
  // CHECK-NOT: sparse_iter.set_encoding
  // CHECK: return
  func.func @op_affinity(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "cpu"} {
    %0 = linalg.matmul indexing_maps = [#tr, #rhs, #out]
         ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    %1 = linalg.matmul indexing_maps = [#tr, #rhs, #out] {sparse_iter.target = "gpu"}
         ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%0 : tensor<?x?xf32>) -> tensor<?x?xf32>
    %2 = linalg.matmul indexing_maps = [#tr, #rhs, #out] {sparse_iter.target = "gpu"}
         ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%1 : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %2 : tensor<?x?xf32>
  }
}
