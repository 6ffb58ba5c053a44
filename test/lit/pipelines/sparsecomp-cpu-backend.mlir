// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparsecomp-cpu-backend)' | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparsecomp-cpu-backend | FileCheck %s --check-prefix=LLVM-ONLY
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-mark-entry-points, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, canonicalize, buffer-deallocation-pipeline, sparse-iter-parallelize)' | FileCheck %s --check-prefix=PAR

// Stage-III kernels (docs/cpu-abi.md) lowered to the LLVM dialect.
// test/python/test_aot.py compiles and runs these same functions.

// Only LLVM and OpenMP ops are left.
// LLVM-ONLY-NOT: {{^ *(func|scf|memref|vector|arith|tensor|bufferization|builtin\.unrealized)\.}}

// CSR SpMV: y[i] = sum_p vals[p] * x[crd[p]]. The row loop is marked parallel
// and carries y; the position loop carries a scalar accumulator.
// Bufferization and canonicalize keep the sparse_iter.parallel mark on the
// row loop, whose output buffer is no longer loop-carried: it becomes parallel.
// PAR-LABEL: func.func @spmv
// PAR: memref.alloc
// PAR: scf.parallel
// PAR: scf.for {{.*}} iter_args
// PAR: scf.reduce
// PAR-NOT: memref.dealloc
// PAR: return
// The ABI attribute of stage III stays on the function for the driver.
// CHECK-LABEL: llvm.func @spmv(
// CHECK-SAME: sparse_iter.abi = "{\22args\22: [{\22kind\22: \22sparse\22
// CHECK: llvm.call @malloc
// The row loop runs on the target's threads (the host's cores here), in
// dynamic chunks sized at run time from the trip count and the team size.
// CHECK: omp.parallel if(%{{.*}}) num_threads(%{{.*}} : i32) {
// CHECK: llvm.call @omp_get_num_threads()
// CHECK: omp.wsloop schedule(dynamic = %{{.*}} : i32) {
// CHECK-NEXT: omp.loop_nest
// CHECK: llvm.fadd
// CHECK-NOT: llvm.call @free
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @_mlir_ciface_spmv(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr)
// CHECK-SAME: attributes {llvm.emit_c_interface, sparse_iter.abi
func.func @spmv(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %vals: tensor<?xf32>, %m: index, %n: index, %x: tensor<?xf32>) -> tensor<?xf32>
    attributes {sparse_iter.abi = "{\"args\": [{\"kind\": \"sparse\", \"dtype\": \"float32\", \"shape\": [\"m\", \"n\"], \"layout\": \"csr\", \"buffers\": [[\"pos1\", \"int32\"], [\"crd1\", \"int32\"], [\"values\", \"float32\"]]}, {\"kind\": \"dense\", \"dtype\": \"float32\", \"shape\": [\"n\"]}], \"results\": [{\"kind\": \"dense\", \"dtype\": \"float32\", \"shape\": [\"m\"]}]}"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty(%m) : tensor<?xf32>
  %y = scf.for %i = %c0 to %m step %c1 iter_args(%acc = %init) -> (tensor<?xf32>) {
    %ip1 = arith.addi %i, %c1 : index
    %lo32 = tensor.extract %pos[%i] : tensor<?xi32>
    %hi32 = tensor.extract %pos[%ip1] : tensor<?xi32>
    %lo = arith.index_cast %lo32 : i32 to index
    %hi = arith.index_cast %hi32 : i32 to index
    %sum = scf.for %p = %lo to %hi step %c1 iter_args(%s = %zero) -> (f32) {
      %j32 = tensor.extract %crd[%p] : tensor<?xi32>
      %j = arith.index_cast %j32 : i32 to index
      %a = tensor.extract %vals[%p] : tensor<?xf32>
      %xj = tensor.extract %x[%j] : tensor<?xf32>
      %s2 = arith.mulf %a, %xj : f32
      %s3 = arith.addf %s, %s2 : f32
      scf.yield %s3 : f32
    }
    %acc2 = tensor.insert %sum into %acc[%i] : tensor<?xf32>
    scf.yield %acc2 : tensor<?xf32>
  } {sparse_iter.parallel}
  return %y : tensor<?xf32>
}

// -----

// CSR SpMM, C = A * B, the dense column dimension vectorized by 8. The
// transfers have out-of-bounds columns and no mask: the lowering masks the
// tail with llvm.intr.masked.load / masked.store.
// CHECK-LABEL: llvm.func @spmm(
// CHECK: omp.parallel if(%{{.*}}) num_threads(%{{.*}} : i32) {
// CHECK: omp.loop_nest
// CHECK: llvm.intr.masked.load %{{.*}} : (!llvm.ptr, vector<8xi1>, vector<8xf32>) -> vector<8xf32>
// CHECK: llvm.intr.fmuladd(%{{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK: llvm.intr.masked.store %{{.*}} : vector<8xf32>, vector<8xi1> into !llvm.ptr
// CHECK: omp.yield
// CHECK-LABEL: llvm.func @_mlir_ciface_spmm(
func.func @spmm(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %vals: tensor<?xf32>, %m: index, %k: index, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %zv = arith.constant dense<0.0> : vector<8xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %init = tensor.empty(%m, %n) : tensor<?x?xf32>
  %c = scf.for %i = %c0 to %m step %c1 iter_args(%ci = %init) -> (tensor<?x?xf32>) {
    %ip1 = arith.addi %i, %c1 : index
    %lo32 = tensor.extract %pos[%i] : tensor<?xi32>
    %hi32 = tensor.extract %pos[%ip1] : tensor<?xi32>
    %lo = arith.index_cast %lo32 : i32 to index
    %hi = arith.index_cast %hi32 : i32 to index
    %cr = scf.for %j0 = %c0 to %n step %c8 iter_args(%cj = %ci) -> (tensor<?x?xf32>) {
      %acc = scf.for %p = %lo to %hi step %c1 iter_args(%a = %zv) -> (vector<8xf32>) {
        %j32 = tensor.extract %crd[%p] : tensor<?xi32>
        %j = arith.index_cast %j32 : i32 to index
        %v = tensor.extract %vals[%p] : tensor<?xf32>
        %vb = vector.broadcast %v : f32 to vector<8xf32>
        %brow = vector.transfer_read %b[%j, %j0], %zero {in_bounds = [false]} : tensor<?x?xf32>, vector<8xf32>
        %a2 = vector.fma %vb, %brow, %a : vector<8xf32>
        scf.yield %a2 : vector<8xf32>
      }
      %cw = vector.transfer_write %acc, %cj[%i, %j0] {in_bounds = [false]} : vector<8xf32>, tensor<?x?xf32>
      scf.yield %cw : tensor<?x?xf32>
    }
    scf.yield %cr : tensor<?x?xf32>
  } {sparse_iter.parallel}
  return %c : tensor<?x?xf32>
}

// -----

// CSR SpMM accumulating into a dense input, D = C + A * B, with explicit tail
// masks. C is an argument, so not writable: bufferization copies it (memcpy)
// into a fresh buffer before the parallel loop writes.
// CHECK-LABEL: llvm.func @spmm_acc(
// CHECK: llvm.call @malloc
// CHECK: "llvm.intr.memcpy"
// CHECK: omp.parallel if(%{{.*}}) num_threads(%{{.*}} : i32) {
// CHECK: llvm.intr.masked.load
// CHECK: llvm.intr.masked.load
// CHECK: llvm.intr.fmuladd
// CHECK: llvm.intr.masked.store
// CHECK-LABEL: llvm.func @_mlir_ciface_spmm_acc(
func.func @spmm_acc(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %vals: tensor<?xf32>, %m: index, %k: index, %b: tensor<?x?xf32>, %cin: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %c = scf.for %i = %c0 to %m step %c1 iter_args(%ci = %cin) -> (tensor<?x?xf32>) {
    %ip1 = arith.addi %i, %c1 : index
    %lo32 = tensor.extract %pos[%i] : tensor<?xi32>
    %hi32 = tensor.extract %pos[%ip1] : tensor<?xi32>
    %lo = arith.index_cast %lo32 : i32 to index
    %hi = arith.index_cast %hi32 : i32 to index
    %cr = scf.for %j0 = %c0 to %n step %c8 iter_args(%cj = %ci) -> (tensor<?x?xf32>) {
      %rem = arith.subi %n, %j0 : index
      %mask = vector.create_mask %rem : vector<8xi1>
      %crow = vector.transfer_read %cj[%i, %j0], %zero, %mask {in_bounds = [true]} : tensor<?x?xf32>, vector<8xf32>
      %acc = scf.for %p = %lo to %hi step %c1 iter_args(%a = %crow) -> (vector<8xf32>) {
        %j32 = tensor.extract %crd[%p] : tensor<?xi32>
        %j = arith.index_cast %j32 : i32 to index
        %v = tensor.extract %vals[%p] : tensor<?xf32>
        %vb = vector.broadcast %v : f32 to vector<8xf32>
        %brow = vector.transfer_read %b[%j, %j0], %zero, %mask {in_bounds = [true]} : tensor<?x?xf32>, vector<8xf32>
        %a2 = vector.fma %vb, %brow, %a : vector<8xf32>
        scf.yield %a2 : vector<8xf32>
      }
      %cw = vector.transfer_write %acc, %cj[%i, %j0], %mask {in_bounds = [true]} : vector<8xf32>, tensor<?x?xf32>
      scf.yield %cw : tensor<?x?xf32>
    }
    scf.yield %cr : tensor<?x?xf32>
  } {sparse_iter.parallel}
  return %c : tensor<?x?xf32>
}

// -----

// Other stage-III dialects: linalg, math, affine, scf.for carrying a scratch
// tensor per row (an alloc freed inside the parallel loop), insert_slice (a
// strided memref.copy: MLIR's runner utils' memrefCopy), an n-D transfer,
// vector.reduction, several results.
// CHECK-LABEL: llvm.func @mixed(
// CHECK-SAME: -> !llvm.struct<(struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>, struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>, f32)>
// CHECK: llvm.intr.exp
// CHECK: omp.parallel
// CHECK: llvm.call @malloc
// CHECK: llvm.call @memrefCopy
// CHECK: llvm.call @free
// CHECK: omp.yield
// CHECK: llvm.intr.vector.reduce.fadd
// CHECK-LABEL: llvm.func @_mlir_ciface_mixed(
func.func @mixed(%x: tensor<?xf32>, %m: index, %n: index) -> (tensor<?xf32>, tensor<?x?xf32>, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %ex = math.exp %a : f32
    linalg.yield %ex : f32
  } -> tensor<?xf32>
  %e2 = tensor.empty(%m, %n) : tensor<?x?xf32>
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%acc = %e2) -> (tensor<?x?xf32>) {
    %scratch = tensor.empty(%n) : tensor<?xf32>
    %s2 = scf.for %j = %c0 to %n step %c1 iter_args(%s = %scratch) -> (tensor<?xf32>) {
      %ij = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%i, %j)
      %ij64 = arith.index_cast %ij : index to i64
      %v = arith.sitofp %ij64 : i64 to f32
      %s3 = tensor.insert %v into %s[%j] : tensor<?xf32>
      scf.yield %s3 : tensor<?xf32>
    }
    %acc2 = tensor.insert_slice %s2 into %acc[%i, 0] [1, %n] [1, 1] : tensor<?xf32> into tensor<?x?xf32>
    scf.yield %acc2 : tensor<?x?xf32>
  } {sparse_iter.parallel}
  %v = vector.transfer_read %g[%c0], %zero : tensor<?xf32>, vector<16xf32>
  %sum = vector.reduction <add>, %v : vector<16xf32> into f32
  %v2 = vector.transfer_read %r[%c0, %c0], %zero : tensor<?x?xf32>, vector<2x4xf32>
  %r2 = vector.transfer_write %v2, %r[%c1, %c1] : vector<2x4xf32>, tensor<?x?xf32>
  return %g, %r2, %sum : tensor<?xf32>, tensor<?x?xf32>, f32
}

// -----

// A returned argument is cloned (malloc + memcpy): results never alias
// caller arrays, and the caller may free every result.
// CHECK-LABEL: llvm.func @identity(
// CHECK: llvm.call @malloc
// CHECK: "llvm.intr.memcpy"
// CHECK-LABEL: llvm.func @_mlir_ciface_identity(
func.func @identity(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
