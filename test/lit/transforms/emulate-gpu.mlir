// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-emulate-gpu | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-emulate-gpu='profile=true' | FileCheck %s --check-prefix=PROFILE --enable-var-scope

// profile=true: a hook the runtime sets (null: nothing recorded) and, before
// each global access, its site, byte address, size, block, thread and kind.
// PROFILE: llvm.mlir.global external @sparsecomp_emu_hook()
// PROFILE: func.func private @sparsecomp_emu_access
// PROFILE: llvm.load
// PROFILE: llvm.icmp "ne"
// PROFILE: llvm.call
// PROFILE-LABEL: func.func @rows
// PROFILE: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index
// PROFILE: %{{.*}}, %[[OFF:.*]], %{{.*}}, %[[STRIDE:.*]] = memref.extract_strided_metadata
// PROFILE: %[[C4:.*]] = arith.constant 4 : index
// PROFILE: %[[SITE:.*]] = arith.constant 0 : i64
// PROFILE: %[[SIZE:.*]] = arith.constant 4 : i64
// PROFILE: %[[STORE:.*]] = arith.constant 1 : i64
// PROFILE: call @sparsecomp_emu_access(%[[SITE]], %{{.*}}, %[[SIZE]], %{{.*}}, %{{.*}}, %[[STORE]])
// PROFILE-NEXT: memref.store

// A launch becomes six loops (grid z, y, x, then block z, y, x); the body's
// block and thread ids are the loops' induction variables, its sizes the
// launch's operands.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[Y:.*]]: memref<?xf32>, %[[N:.*]]: index, %[[GRID:.*]]: index)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C128:.*]] = arith.constant 128 : index
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C1]] step
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C1]] step
// CHECK: scf.for %[[BX:.*]] = %[[C0]] to %[[GRID]] step
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C1]] step
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C1]] step
// CHECK: scf.for %[[TX:.*]] = %[[C0]] to %[[C128]] step
// CHECK: %[[BASE:.*]] = arith.muli %[[BX]], %[[C128]]
// CHECK: %[[ROW:.*]] = arith.addi %[[TX]], %[[BASE]]
// CHECK: arith.cmpi ult, %[[ROW]], %[[N]]
// CHECK: memref.store %{{.*}}, %[[Y]][%[[ROW]]]
// CHECK-NOT: gpu.
func.func @rows(%y: memref<?xf32>, %n: index, %grid: index) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %grid, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %sx : index
    %row = arith.addi %tx, %base : index
    %in = arith.cmpi ult, %row, %n : index
    scf.if %in {
      memref.store %one, %y[%row] : memref<?xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// Id and size ops in the body read the same loops and operands.
// CHECK-LABEL: func.func @ids
// CHECK-SAME: (%{{.*}}: memref<?xindex>, %[[G:.*]]: index, %[[B:.*]]: index)
// CHECK: scf.for %[[BX:.*]] = %{{.*}} to %[[G]] step
// CHECK: scf.for %[[TX:.*]] = %{{.*}} to %[[B]] step
// CHECK: arith.addi %[[BX]], %[[TX]]
// CHECK: arith.addi %[[G]], %[[B]]
func.func @ids(%y: memref<?xindex>, %g: index, %b: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %g, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %b, %sy = %c1, %sz = %c1) {
    %i = gpu.block_id x
    %t = gpu.thread_id x
    %s = arith.addi %i, %t : index
    %gd = gpu.grid_dim x
    %bd = gpu.block_dim x
    %d = arith.addi %gd, %bd : index
    memref.store %s, %y[%d] : memref<?xindex>
    gpu.terminator
  }
  return
}

// -----

// Threads that meet at a barrier run in phases: the ops before the barrier
// for every thread of the block, then the ops after it. A value the second
// phase needs from the first is kept per thread in an array (allocated once,
// before the launch's loops).
// CHECK-LABEL: func.func @barrier
// CHECK-SAME: (%[[BUF:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?xf32>)
// CHECK: %[[KEEP:.*]] = memref.alloca(%{{.*}}) : memref<?xf32>
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %[[T1:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[V:.*]] = arith.addf
// CHECK: memref.store %[[V]], %[[BUF]]
// CHECK: memref.store %[[V]], %[[KEEP]][%[[T1]]]
// CHECK: scf.for %[[T2:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[W:.*]] = memref.load %[[KEEP]][%[[T2]]]
// CHECK: memref.load %[[BUF]]
// CHECK: arith.addf %{{.*}}, %[[W]]
// CHECK-NOT: gpu.barrier
func.func @barrier(%buf: memref<?xf32>, %out: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %i = arith.index_cast %tx : index to i32
    %f = arith.sitofp %i : i32 to f32
    %v = arith.addf %f, %f : f32
    memref.store %v, %buf[%tx] : memref<?xf32>
    gpu.barrier
    %mirror = arith.subi %c3, %tx : index
    %w = memref.load %buf[%mirror] : memref<?xf32>
    %s = arith.addf %w, %v : f32
    memref.store %s, %out[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// nvgpu.mma.sync runs once per warp on every lane's registers: the lanes'
// A, B and C fragments are scattered into tiles, multiplied (tf32 inputs
// keep their top 19 bits), and D is gathered back into each lane's array.
// CHECK-LABEL: func.func @mma
// CHECK-DAG: memref.alloca(%{{.*}}) : memref<?xvector<4xf32>>
// CHECK-DAG: memref.alloca(%{{.*}}) : memref<?xvector<2xf32>>
// CHECK-DAG: memref.alloca() : memref<16x8xf32>
// CHECK-DAG: memref.alloca() : memref<8x8xf32>
// CHECK: vector.shape_cast %{{.*}} : vector<4x1xf32> to vector<4xf32>
// CHECK: arith.constant -8192 : i32
// CHECK: arith.mulf
// CHECK: vector.from_elements
// CHECK-NOT: nvgpu.mma.sync
func.func @mma(%A: memref<?xf32>, %D: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %x = memref.load %A[%tx] : memref<?xf32>
    %a = vector.broadcast %x : f32 to vector<4x1xf32>
    %b = vector.broadcast %x : f32 to vector<2x1xf32>
    %c = arith.constant dense<0.0> : vector<2x2xf32>
    %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 8], tf32Enabled}
        : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
    %e = vector.extract %d[0, 0] : f32 from vector<2x2xf32>
    memref.store %e, %D[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// nvgpu.mma.sp.sync: a zeroed dense A tile, each lane's kept values placed
// by the 2-bit indices of the metadata word of lane 4 * group (selector 0),
// f16 widened to f32, then the same product and gather.
// CHECK-LABEL: func.func @mma_sp
// CHECK-DAG: memref.alloca(%{{.*}}) : memref<?xvector<2xi16>>
// CHECK-DAG: memref.alloca() : memref<16x16xf32>
// CHECK: vector.bitcast %{{.*}} : vector<2xi16> to vector<1xi32>
// CHECK: arith.shrui %{{.*}}, %{{.*}} : i32
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK-NOT: nvgpu.mma.sp.sync
func.func @mma_sp(%A: memref<?xf16>, %M: memref<?xi32>, %D: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %x = memref.load %A[%tx] : memref<?xf16>
    %a = vector.broadcast %x : f16 to vector<2x2xf16>
    %b = vector.broadcast %x : f16 to vector<2x2xf16>
    %c = arith.constant dense<0.0> : vector<2x2xf32>
    %w = memref.load %M[%tx] : memref<?xi32>
    %wv = vector.broadcast %w : i32 to vector<1xi32>
    %meta = vector.bitcast %wv : vector<1xi32> to vector<2xi16>
    %d = nvgpu.mma.sp.sync (%a, %b, %c) metadata (%meta) {mmaShape = [16, 8, 16]}
        : (vector<2x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
    %e = vector.extract %d[0, 0] : f32 from vector<2x2xf32>
    memref.store %e, %D[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// Workgroup memory: one plain buffer per block, allocated in the grid's x loop
// before the block's threads and freed after them; loads and stores use it as
// they are. Profiled, its accesses are kind 6 (load) and 7 (store), with an
// offset from the tile's static strides (shared memory, not global traffic).
// CHECK-LABEL: func.func @shared_tile
// CHECK: scf.for %[[BX:.*]] =
// CHECK: %[[TILE:.*]] = memref.alloc() : memref<4x32xf32>
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[TILE]][
// CHECK: memref.load %[[TILE]][
// CHECK: memref.dealloc %[[TILE]]
// CHECK-NOT: workgroup
// PROFILE-LABEL: func.func @shared_tile
// PROFILE: %[[C7:.*]] = arith.constant 7 : i64
// PROFILE: call @sparsecomp_emu_access(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C7]])
// PROFILE-NEXT: memref.store
// PROFILE: %[[C6:.*]] = arith.constant 6 : i64
// PROFILE: call @sparsecomp_emu_access(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C6]])
// PROFILE-NEXT: memref.load
func.func @shared_tile(%y: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %f = arith.constant 2.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%tile : memref<4x32xf32, #gpu.address_space<workgroup>>) {
    memref.store %f, %tile[%c1, %tx] : memref<4x32xf32, #gpu.address_space<workgroup>>
    %v = memref.load %tile[%c1, %tx] : memref<4x32xf32, #gpu.address_space<workgroup>>
    memref.store %v, %y[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// cp.async into workgroup memory: done when issued (a masked load of the
// srcElements elements read, zeros for the rest, stored whole); the group
// ops are dropped.
// CHECK-LABEL: func.func @async_copy
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-NOT: nvvm.cp.async
// CHECK: %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<8xi1>
// CHECK: %[[V:.*]] = vector.maskedload %{{.*}}[%{{.*}}], %[[MASK]], %{{.*}} : memref<?xf16>, vector<8xi1>, vector<8xf16> into vector<8xf16>
// CHECK: vector.store %[[V]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x8xf16>, vector<8xf16>
// CHECK: %[[ALL:.*]] = vector.create_mask %c4{{.*}} : vector<4xi1>
// CHECK: vector.maskedload %{{.*}}, %[[ALL]]
func.func @async_copy(%x: memref<?xf16>, %w: memref<?xi32>, %y: memref<?xf16>, %read: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<2x8xf16, #gpu.address_space<workgroup>>, %words : memref<4xi32, #gpu.address_space<workgroup>>) {
    %t = nvgpu.device_async_copy %x[%c0], %buf[%c1, %c0], 8, %read {bypassL1} : memref<?xf16> to memref<2x8xf16, #gpu.address_space<workgroup>>
    %u = nvgpu.device_async_copy %w[%c0], %words[%c0], 4 : memref<?xi32> to memref<4xi32, #gpu.address_space<workgroup>>
    nvvm.cp.async.commit.group
    nvvm.cp.async.wait.group 0
    %v = memref.load %buf[%c1, %c0] : memref<2x8xf16, #gpu.address_space<workgroup>>
    memref.store %v, %y[%c0] : memref<?xf16>
    gpu.terminator
  }
  return
}

// -----

// An access that declares an alignment checks its address first: where a GPU
// would fault (misaligned address), the emulated kernel writes a message
// naming the access to stderr and aborts.
// CHECK-LABEL: func.func @aligned_load
// CHECK: memref.extract_strided_metadata %{{.*}} : memref<?xf32> -> memref<f32>, index, index, index
// CHECK: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: %[[REM:.*]] = arith.remui %{{.*}}, %c16
// CHECK: %[[BAD:.*]] = arith.cmpi ne, %[[REM]]
// CHECK: scf.if %[[BAD]] {
// CHECK: %[[MSG:.*]] = llvm.mlir.addressof @__sparsecomp_fault_message_0 : !llvm.ptr
// CHECK: func.call @__sparsecomp_emulated_fault(%[[MSG]])
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
// CHECK: func.func private @__sparsecomp_emulated_fault(%{{.*}}: !llvm.ptr)
// CHECK: llvm.call @fputs
// CHECK: llvm.call @abort
// CHECK: llvm.mlir.global private constant @__sparsecomp_fault_message_0("sparse-iter-emulate-gpu: {{.*}}: 'vector.load' needs 16-byte alignment and its address has none (a GPU faults: misaligned address)\0A\00")
func.func @aligned_load(%x: memref<?xf32>, %y: memref<?xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = vector.load %x[%i] {alignment = 16 : i64} : memref<?xf32>, vector<4xf32>
    vector.store %v, %y[%c0] : memref<?xf32>, vector<4xf32>
    gpu.terminator
  }
  return
}
