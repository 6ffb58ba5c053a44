// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='warps=2 tiles=1' | FileCheck %s --check-prefix=SMALL
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='tf32=false' 2>/dev/null | FileCheck %s --check-prefix=NOTF32
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='staged=false row-tiles=1' | FileCheck %s --check-prefix=ONEROW
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='staged=false' | FileCheck %s --check-prefix=WARP

// A BSR 16x8 x dense product of a CUDA function becomes a call of a private
// tensor-core kernel: the operand's buffers, read-only buffers of the dense
// operands, a new output buffer.
// CHECK-LABEL: func.func @bsr_spmm
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #sparse_iter.layout{{.*}}>, %[[B:.*]]: tensor<?x?xf32>, %[[C:.*]]: tensor<?x?xf32>)
// CHECK: %[[POS:.*]] = sparse_iter.positions %[[A]][1] {{.*}} -> tensor<?xi32>
// CHECK: %[[CRD:.*]] = sparse_iter.coordinates %[[A]][1] {{.*}} -> tensor<?xi32>
// CHECK: %[[VAL:.*]] = sparse_iter.values %[[A]] {{.*}} -> tensor<?xf32>
// CHECK: %[[POSB:.*]] = bufferization.to_buffer %[[POS]] read_only
// CHECK: %[[CRDB:.*]] = bufferization.to_buffer %[[CRD]] read_only
// CHECK: %[[VALB:.*]] = bufferization.to_buffer %[[VAL]] read_only
// CHECK: %[[BB:.*]] = bufferization.to_buffer %[[B]] read_only
// CHECK: %[[CB:.*]] = bufferization.to_buffer %[[C]] read_only
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK: call @[[KERNEL:__sparse_iter_bsr_mma_16x8_f32_i32_i32_w4t4]](%[[POSB]], %[[CRDB]], %[[VALB]], %[[BB]], %[[CB]], %[[OUT]])
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict
// CHECK: return %[[R]]
// The kernel: 4 warps of 32 lanes per block; a warp per 16-row slice, and per
// stored block 4 tf32 MMAs (one per group of 8 columns) on vector loads of A.
// CHECK: func.func private @[[KERNEL]]
// CHECK: gpu.launch
// CHECK-SAME: threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128
// CHECK: scf.for %{{.*}} iter_args
// CHECK: vector.load %{{.*}} : memref<?xf32>, vector<2xf32>
// CHECK-COUNT-4: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled}
// CHECK-NOT: nvgpu.mma.sync
// CHECK: vector.maskedstore
// SMALL: func.func private @__sparse_iter_bsr_mma_16x8_f32_i32_i32_w2t1
// SMALL-SAME: (%{{.*}}: memref<?xi32>
// SMALL: in (%{{.*}} = %c64
// SMALL: nvgpu.mma.sync
// SMALL-NOT: nvgpu.mma.sync
// SMALL: func.func @static_bsr
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 16 : dense, j floordiv 8 : compressed, i mod 16 : dense, j mod 8 : dense), posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @bsr_spmm(%A: tensor<?x?xf32, #bsr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr>, tensor<?x?xf32>)
                       outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}

// -----

// 32x16 blocks with 64-bit indices (upstream's index-typed BSR) and static
// shapes: two 16-row slices per block row, two k slices per block; the
// static operands are cast to the kernel's dynamic memrefs and back.
// CHECK-LABEL: func.func @static_bsr
// CHECK: memref.cast %{{.*}} : memref<64x32xf32> to memref<?x?xf32>
// CHECK: call @__sparse_iter_bsr_mma_32x16_f32_i64_i64_w4t4
// CHECK: memref.cast %{{.*}} : memref<?x?xf32> to memref<64x32xf32>
// CHECK: bufferization.to_tensor %{{.*}} restrict : memref<64x32xf32> to tensor<64x32xf32>
// CHECK: func.func private @__sparse_iter_bsr_mma_32x16_f32_i64_i64_w4t4(%{{.*}}: memref<?xi64>, %{{.*}}: memref<?xi64>
// CHECK-COUNT-8: nvgpu.mma.sync
#bsr32 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 32 : dense, j floordiv 16 : compressed, i mod 32 : dense, j mod 16 : dense)}>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8], sparse_mma_shapes = []>}} {
  func.func @static_bsr(%A: tensor<64x48xf32, #bsr32>, %B: tensor<48x32xf32>) -> tensor<64x32xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<64x32xf32>
    %C = linalg.fill ins(%zero : f32) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
    %r = linalg.matmul ins(%A, %B : tensor<64x48xf32, #bsr32>, tensor<48x32xf32>)
                       outs(%C : tensor<64x32xf32>) -> tensor<64x32xf32>
    return %r : tensor<64x32xf32>
  }
}

// -----

// Left to the scalar schedule: a CPU function, blocks that neither tile
// nor pack into MMAs (4x12 f32), CSR, f64, a target without the tf32 shape.
// CHECK-LABEL: func.func @negative_cpu
// CHECK: linalg.matmul
// CHECK-LABEL: func.func @negative_small_blocks
// CHECK: linalg.matmul
// CHECK-LABEL: func.func @negative_csr
// CHECK: linalg.matmul
// CHECK-LABEL: func.func @negative_f64
// CHECK: linalg.matmul
// CHECK-NOT: func.func private
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 16 : dense, j floordiv 8 : compressed, i mod 16 : dense, j mod 8 : dense), posWidth = 32, crdWidth = 32}>
#bsr4x12 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 12 : compressed, i mod 4 : dense, j mod 12 : dense), posWidth = 32, crdWidth = 32}>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {cpu = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 2>, gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k8], sparse_mma_shapes = []>}} {
  func.func @negative_cpu(%A: tensor<?x?xf32, #bsr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "cpu"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
  func.func @negative_small_blocks(%A: tensor<?x?xf32, #bsr4x12>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "gpu"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr4x12>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
  func.func @negative_csr(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "gpu"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
  func.func @negative_f64(%A: tensor<?x?xf64, #bsr>, %B: tensor<?x?xf64>, %C: tensor<?x?xf64>) -> tensor<?x?xf64> attributes {sparse_iter.target = "gpu"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #bsr>, tensor<?x?xf64>) outs(%C : tensor<?x?xf64>) -> tensor<?x?xf64>
    return %r : tensor<?x?xf64>
  }
}

// -----

// 2:4 f16 with mma.sp metadata: the values and the metadata words (level 2's
// coordinates) go to a kernel on nvgpu.mma.sp.sync, f32 accumulation: by
// default the block-tiled one that stages A and B in shared memory, declared
// here and defined after bufferization (sparse-iter-gpu-kernel-bodies).
// CHECK-LABEL: func.func @nm_spmm
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf16, #sparse_iter.layout{{.*}}>
// CHECK: %[[VAL:.*]] = sparse_iter.values %[[A]] {{.*}} -> tensor<?xf16>
// CHECK: %[[META:.*]] = sparse_iter.coordinates %[[A]][2] {{.*}} -> tensor<?xi32>
// CHECK: %[[VALB:.*]] = bufferization.to_buffer %[[VAL]] read_only
// CHECK: %[[METAB:.*]] = bufferization.to_buffer %[[META]] read_only
// CHECK: call @[[KERNEL:__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n4x4]](%[[VALB]], %[[METAB]],
// The same 2:4 layout in f32 (mma.sp takes f16 2:4, and its metadata words
// hold no indices for the dense MMAs) or on a target without sparse MMAs stays
// with the scalar schedule.
// CHECK-LABEL: func.func @negative_nm_f32
// CHECK: linalg.matmul
// CHECK-LABEL: func.func @negative_no_sparse_mma
// CHECK: linalg.matmul
// CHECK: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n4x4(memref<?xf16>, memref<?xi32>, memref<?x?xf16>, memref<?x?xf32>, memref<?x?xf32>)
// CHECK-NOT: gpu.launch
// With staged=false, the warp-tiled kernel that reads global memory: a
// warp's two 16-row tiles share each k tile's B fragments, 16 MMAs a step of
// two k tiles (8 with row-tiles=1).
// WARP: call @__sparse_iter_nm_mma_sp_2x4_f16_i32_w4t4r2(
// WARP: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_w4t4r2(%{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi32>
// WARP: vector.bitcast %{{.*}} : vector<1xi32> to vector<2xi16>
// WARP: vector.maskedload %{{.*}} : memref<?xf16>, vector<4xi1>, vector<4xf16> into vector<4xf16>
// WARP: gpu.shuffle  idx
// WARP-COUNT-16: nvgpu.mma.sp.sync({{.*}}) metadata({{.*}}) {mmaShape = [16, 8, 16]}
// WARP-NOT: nvgpu.mma.sp.sync
// WARP: scf.yield
// ONEROW: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_w4t4(
// ONEROW-COUNT-8: nvgpu.mma.sp.sync
// ONEROW-NOT: nvgpu.mma.sp.sync
// ONEROW: scf.yield
#nm = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k16]>, old = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = []>}} {
  func.func @nm_spmm(%A: tensor<?x?xf16, #nm>, %B: tensor<?x?xf16>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "gpu"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #nm>, tensor<?x?xf16>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
  func.func @negative_nm_f32(%A: tensor<?x?xf32, #nm>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "gpu"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #nm>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
  func.func @negative_no_sparse_mma(%A: tensor<?x?xf16, #nm>, %B: tensor<?x?xf16>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "old"} {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #nm>, tensor<?x?xf16>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}

// -----

// f16 inputs with an f16 result: the MMAs accumulate in f16, the type the
// product's outs gives its sums (BSR on mma.sync, 2:4 on mma.sp); cin and the
// new output buffer are f16.
// CHECK-LABEL: func.func @bsr_f16_acc
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf16>
// CHECK: call @__sparse_iter_bsr_mma_16x16_f16_accf16_i32_i32_w4t4(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OUT]])
// CHECK: bufferization.to_tensor %[[OUT]] restrict : memref<?x?xf16> to tensor<?x?xf16>
// CHECK-LABEL: func.func @nm_f16_acc
// CHECK: call @__sparse_iter_nm_mma_sp_2x4_f16_accf16_i32_staged_m2x4n4x4(
// CHECK: func.func private @__sparse_iter_bsr_mma_16x16_f16_accf16_i32_i32_w4t4(%{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>)
// CHECK: vector.maskedload %{{.*}} : memref<?x?xf16>, vector<2xi1>, vector<2xf16> into vector<2xf16>
// CHECK: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
// CHECK: vector.maskedstore %{{.*}} : memref<?x?xf16>, vector<2xi1>, vector<2xf16>
// CHECK: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_accf16_i32_staged_m2x4n4x4(memref<?xf16>, memref<?xi32>, memref<?x?xf16>, memref<?x?xf16>, memref<?x?xf16>)
#bsr16 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 16 : dense, j floordiv 16 : compressed, i mod 16 : dense, j mod 16 : dense), posWidth = 32, crdWidth = 32}>
#nm = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @bsr_f16_acc(%A: tensor<?x?xf16, #bsr16>, %B: tensor<?x?xf16>, %C: tensor<?x?xf16>) -> tensor<?x?xf16> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #bsr16>, tensor<?x?xf16>) outs(%C : tensor<?x?xf16>) -> tensor<?x?xf16>
    return %r : tensor<?x?xf16>
  }
  func.func @nm_f16_acc(%A: tensor<?x?xf16, #nm>, %B: tensor<?x?xf16>, %C: tensor<?x?xf16>) -> tensor<?x?xf16> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #nm>, tensor<?x?xf16>) outs(%C : tensor<?x?xf16>) -> tensor<?x?xf16>
    return %r : tensor<?x?xf16>
  }
}

// -----

// Blocks smaller than an MMA tile pack several to an MMA: the kernel computes
// out^T = B^T A^T, 8 rows of a block row on the MMA's n, k / C blocks on its
// k (4x4 f32: two blocks a tf32 m16n8k8), 16 output columns on its m; each
// lane gathers B's rows by the blocks' coordinates.
// CHECK-LABEL: func.func @packed_4x4
// CHECK: call @[[KERNEL:__sparse_iter_bsr_mma_packed_4x4_f32_i32_i32_w4t2]](
// CHECK: func.func private @[[KERNEL]](%{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: gpu.launch
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c2{{.*}} iter_args
// CHECK: memref.load %{{.*}} : memref<?xi32>
// CHECK-COUNT-2: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled}
// CHECK-NOT: nvgpu.mma.sync
// CHECK: memref.store
// With tf32=false f32 products keep the scalar schedule (f16 ones still go).
// NOTF32-LABEL: func.func @packed_4x4
// NOTF32: linalg.matmul
// NOTF32-NOT: nvgpu.mma.sync
#bsr4 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 32}>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @packed_4x4(%A: tensor<?x?xf32, #bsr4>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr4>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}

// -----

// n:m with indices (here 2:4 in f32, which mma.sp cannot take: tf32 is 1:2
// there) runs on the dense tensor cores: each lane expands its A elements
// from the group's kept values and indices, then a tf32 mma.sync.
// CHECK-LABEL: func.func @nm_dense
// CHECK: %[[VAL:.*]] = sparse_iter.values %{{.*}} -> tensor<?xf32>
// CHECK: %[[IDX:.*]] = sparse_iter.coordinates %{{.*}}[2] {{.*}} -> tensor<?xi8>
// CHECK: call @[[KERNEL:__sparse_iter_nm_mma_dense_2x4_f32_i8_w4t4]](
// CHECK: func.func private @[[KERNEL]](%{{.*}}: memref<?xf32>, %{{.*}}: memref<?xi8>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: arith.index_castui %{{.*}} : i8 to index
// CHECK: arith.select
// CHECK-COUNT-4: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled}
#nm24 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 8}>
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @nm_dense(%A: tensor<?x?xf32, #nm24>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #nm24>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}
