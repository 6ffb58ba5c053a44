// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-stage-structure | FileCheck %s --enable-var-scope

// SpMM's schedule: a warp per row (thread_y), its 32 lanes over output
// columns; every lane walks the row's entries with the same bounds. The walk
// becomes chunks of 32: lane l loads entry chunk + l of the coordinates and the
// values into its warp's row of a shared tile, the warp meets, and the chunk is
// read from the tiles at [warp, t]; B's row comes from the staged coordinate.
// CHECK-LABEL: func.func @rows_of_a_warp
// CHECK-SAME: (%[[POS:[^:]*]]: memref<?xi32>, %[[CRD:[^:]*]]: memref<?xi32>, %[[VAL:[^:]*]]: memref<?xf32>, %[[B:[^:]*]]: memref<?x?xf32>
// CHECK: gpu.launch
// CHECK-SAME: threads(%[[LANE:[^,]*]], %[[WARP:[^,]*]], %{{[^)]*}}) in
// CHECK-SAME: workgroup(%[[T1:[^ ]*]] : memref<4x32x[[E1:[if]32]], #gpu.address_space<workgroup>>, %[[T2:[^ ]*]] : memref<4x32x[[E2:[if]32]], #gpu.address_space<workgroup>>)
// CHECK: %[[LO:.*]] = arith.index_castui
// CHECK: %[[HI:.*]] = arith.index_castui
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK: scf.for %[[CHUNK:.*]] = %[[LO]] to %[[HI]] step %[[C32]] iter_args(%[[ACC0:.*]] = %{{.*}}) -> (f32)
// CHECK: %[[E:.*]] = arith.addi %[[CHUNK]], %[[LANE]]
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[E]], %[[HI]]
// CHECK: scf.if %[[IN]]
// CHECK-DAG: memref.load %{{.*}}[%[[E]]]
// CHECK-DAG: memref.store %{{.*}}, %[[T1]][%[[WARP]], %[[LANE]]]
// CHECK-DAG: memref.store %{{.*}}, %[[T2]][%[[WARP]], %[[LANE]]]
// CHECK: %[[ALL:.*]] = arith.constant -1 : i32
// CHECK: nvvm.bar.warp.sync %[[ALL]]
// CHECK: %[[LEFT:.*]] = arith.subi %[[HI]], %[[CHUNK]]
// CHECK: %[[N:.*]] = arith.minsi %[[LEFT]], %[[C32]]
// CHECK: %[[R:.*]] = scf.for %[[T:.*]] = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[ACC0]]) -> (f32)
// CHECK-NOT: memref.load %[[CRD]]
// CHECK-NOT: memref.load %[[VAL]]
// CHECK-DAG: memref.load %{{.*}}[%[[WARP]], %[[T]]] : memref<4x32xi32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.load %{{.*}}[%[[WARP]], %[[T]]] : memref<4x32xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[B]]
// CHECK: scf.yield
// CHECK: nvvm.bar.warp.sync %[[ALL]]
// CHECK: scf.yield %[[R]] : f32
func.func @rows_of_a_warp(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>,
                          %b: memref<?x?xf32>, %c: memref<?x?xf32>, %m: index, %n: index) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %m, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c4, %sz = %c1) {
    %r0 = arith.muli %by, %c4 : index
    %row = arith.addi %r0, %ty : index
    %inside = arith.cmpi slt, %row, %m : index
    scf.if %inside {
      %p0 = memref.load %pos[%row] : memref<?xi32>
      %lo = arith.index_castui %p0 : i32 to index
      %next = arith.addi %row, %c1 : index
      %p1 = memref.load %pos[%next] : memref<?xi32>
      %hi = arith.index_castui %p1 : i32 to index
      %sum = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
        %j = memref.load %crd[%p] : memref<?xi32>
        %jj = arith.index_cast %j : i32 to index
        %v = memref.load %val[%p] : memref<?xf32>
        %bv = memref.load %b[%jj, %tx] : memref<?x?xf32>
        %prod = arith.mulf %v, %bv : f32
        %s = arith.addf %acc, %prod : f32
        scf.yield %s : f32
      }
      memref.store %sum, %c[%row, %tx] : memref<?x?xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// The entry's position itself (SDDMM stores its result at it) becomes
// chunk + t; the output buffer, written by the launch, is not staged.
// CHECK-LABEL: func.func @position_kept
// CHECK: workgroup(%[[T:[^ ]*]] : memref<2x32xi32, #gpu.address_space<workgroup>>)
// CHECK-NOT: memref<2x32xf32
// CHECK: scf.for %[[CHUNK:[^ ]*]] =
// CHECK: scf.for %[[T2:[^ ]*]] =
// CHECK: %[[P:.*]] = arith.addi %[[CHUNK]], %[[T2]]
// CHECK: memref.load %[[T]][%{{.*}}, %[[T2]]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[P]]] : memref<?xf32>
func.func @position_kept(%pos: memref<?xi32>, %crd: memref<?xi32>, %out: memref<?xf32>, %m: index) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %m, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c2, %sz = %c1) {
    %row = arith.muli %bx, %c2 : index
    %r = arith.addi %row, %ty : index
    %p0 = memref.load %pos[%r] : memref<?xi32>
    %lo = arith.index_castui %p0 : i32 to index
    %next = arith.addi %r, %c1 : index
    %p1 = memref.load %pos[%next] : memref<?xi32>
    %hi = arith.index_castui %p1 : i32 to index
    scf.for %p = %lo to %hi step %c1 {
      %j = memref.load %crd[%p] : memref<?xi32>
      %f = arith.sitofp %j : i32 to f32
      memref.store %f, %out[%p] : memref<?xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// Left alone: bounds that depend on the lane, a loop under a condition that
// depends on the lane, a buffer the launch writes, and blocks that are not
// 32 lanes wide.
// CHECK-LABEL: func.func @not_staged
// CHECK-NOT: workgroup(
// CHECK-NOT: nvvm.bar.warp.sync
// CHECK: return
func.func @not_staged(%pos: memref<?xi32>, %crd: memref<?xi32>, %out: memref<?xi32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %m, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    // lane-dependent lower bound
    %p0 = memref.load %pos[%bx] : memref<?xi32>
    %lo = arith.index_castui %p0 : i32 to index
    %mine = arith.addi %lo, %tx : index
    %hi = arith.addi %lo, %c128 : index
    scf.for %p = %mine to %hi step %c1 {
      %j = memref.load %crd[%p] : memref<?xi32>
      memref.store %j, %out[%tx] : memref<?xi32>
    }
    // under a lane-dependent condition
    %even = arith.cmpi slt, %tx, %c1 : index
    scf.if %even {
      scf.for %p = %lo to %hi step %c1 {
        %j = memref.load %crd[%p] : memref<?xi32>
        memref.store %j, %out[%tx] : memref<?xi32>
      }
    }
    // a buffer the launch writes
    scf.for %p = %lo to %hi step %c1 {
      %j = memref.load %out[%p] : memref<?xi32>
      memref.store %j, %out[%tx] : memref<?xi32>
    }
    gpu.terminator
  }
  // 128 threads in a row: no warp per row
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %m, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    scf.for %p = %c0 to %m step %c1 {
      %j = memref.load %crd[%p] : memref<?xi32>
      memref.store %j, %out[%tx] : memref<?xi32>
    }
    gpu.terminator
  }
  return
}
