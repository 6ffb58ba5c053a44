// RUN: sparsecomp-opt %s --sparse-iter-gpu-kernel-bodies | FileCheck %s

// The declaration sparse-iter-gpu-tensorize leaves for a block-tiled 2:4
// kernel becomes the kernel its name says: 2 x 2 warps of 4 x 8 MMA tiles
// (a 128 x 128 block tile), A's values, B and the metadata words staged in
// two stages of workgroup memory, 64 mma.sp a step of 32 columns of k.
// CHECK-LABEL: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n2x8
// CHECK-SAME: (%{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%[[SA:.*]] : memref<2x128x24xf16, #gpu.address_space<workgroup>>, %[[SB:.*]] : memref<2x32x136xf16, #gpu.address_space<workgroup>>, %[[SM:.*]] : memref<2x8x16xi32, #gpu.address_space<workgroup>>)
// The first step's copies: where the operands allow, cp.async of 16 bytes
// (zeros filled past the matrix); otherwise masked loads the thread stores.
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[SA]][%c0{{.*}}], 8, %{{.*}} {bypassL1} : memref<?xf16> to memref<2x128x24xf16, #gpu.address_space<workgroup>>
// CHECK: vector.maskedload
// CHECK: vector.store %{{.*}}, %[[SA]]
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[SB]]
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[SM]]{{.*}}, 4 {bypassL1}
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// The next step's copies into the other stage, then this step's awaited.
// CHECK: scf.if
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[SA]]
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: } else {
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.barrier
// CHECK: vector.load %[[SB]]{{.*}} vector<8xf16>
// CHECK: memref.load %[[SM]]
// CHECK: vector.load %[[SA]]{{.*}} vector<2xf16>
// CHECK-COUNT-64: nvgpu.mma.sp.sync({{.*}}) metadata({{.*}}) {mmaShape = [16, 8, 16]}
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK: vector.maskedstore
// f16 accumulators and 64-bit metadata words (read from global memory, a
// word per lane), 1 x 2 warps of 2 x 4 tiles.
// CHECK-LABEL: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_accf16_i64_staged_m1x2n2x4
// CHECK-SAME: memref<?xi64>
// CHECK: workgroup(%{{.*}} : memref<2x32x24xf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<2x32x72xf16, #gpu.address_space<workgroup>>) {
// CHECK: memref.load %{{.*}} : memref<?xi64>
// CHECK-COUNT-16: nvgpu.mma.sp.sync({{.*}}) -> vector<2x2xf16>
// Other declarations stay.
// CHECK: func.func private @elsewhere(memref<?xf16>)
// CHECK: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n2x3(memref<?xf16>)
// CHECK: func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m1x2n4x4(memref<?xf16>)
module {
  func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n2x8(memref<?xf16>, memref<?xi32>, memref<?x?xf16>, memref<?x?xf32>, memref<?x?xf32>)
  func.func private @__sparse_iter_nm_mma_sp_2x4_f16_accf16_i64_staged_m1x2n2x4(memref<?xf16>, memref<?xi64>, memref<?x?xf16>, memref<?x?xf16>, memref<?x?xf16>)
  func.func private @elsewhere(memref<?xf16>)
  // Not kernels the name can say (3 column tiles a warp; 4 warps across copying
  // 2 row tiles' chunks): left alone.
  func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m2x4n2x3(memref<?xf16>)
  func.func private @__sparse_iter_nm_mma_sp_2x4_f16_i32_staged_m1x2n4x4(memref<?xf16>)
}
