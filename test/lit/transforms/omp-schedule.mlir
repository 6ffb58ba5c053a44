// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-omp-schedule)' | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-omp-schedule{schedule=static})' | FileCheck %s --check-prefix=STATIC --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-omp-schedule{schedule=guided chunk=64 threads=3})' | FileCheck %s --check-prefix=FIXED --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-omp-schedule{serial-below=0})' | FileCheck %s --check-prefix=ALWAYS --enable-var-scope

// Default: dynamic, with a chunk computed at run time from the trip count and
// the team size, and num_threads from the module's only CPU target; fewer than
// 32 rows run on the calling thread (the if clause).
// CHECK: func.func private @omp_get_num_threads() -> i32
// CHECK-LABEL: func.func @row_loop
// CHECK-SAME: (%[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[NT:.*]] = arith.constant 4 : i32
// CHECK: %[[ROWS:.*]] = arith.subi %[[M]], %[[C0]] : index
// CHECK: %[[N:.*]] = arith.ceildivsi %[[ROWS]], %[[C1]] : index
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK: %[[ENOUGH:.*]] = arith.cmpi sge, %[[N]], %[[C32]] : index
// CHECK: omp.parallel if(%[[ENOUGH]]) num_threads(%[[NT]] : i32) {
// CHECK: %[[TEAM:.*]] = func.call @omp_get_num_threads() : () -> i32
// CHECK: %[[TEAM_IDX:.*]] = arith.index_cast %[[TEAM]] : i32 to index
// CHECK: %[[PER:.*]] = arith.muli %[[TEAM_IDX]], %{{.*}} : index
// CHECK: %[[SPAN:.*]] = arith.subi %[[M]], %[[C0]] : index
// CHECK: %[[TRIPS:.*]] = arith.ceildivsi %[[SPAN]], %[[C1]] : index
// CHECK: %[[EACH:.*]] = arith.ceildivsi %[[TRIPS]], %[[PER]] : index
// CHECK: %[[LOW:.*]] = arith.maxsi %[[EACH]], %{{.*}} : index
// CHECK: %[[CAP:.*]] = arith.constant 256 : index
// CHECK: %[[HIGH:.*]] = arith.minsi %[[LOW]], %[[CAP]] : index
// CHECK: %[[CHUNK:.*]] = arith.index_cast %[[HIGH]] : index to i32
// CHECK: omp.wsloop schedule(dynamic = %[[CHUNK]] : i32) {
// CHECK-NEXT: omp.loop_nest (%{{.*}}) : index = (%[[C0]]) to (%[[M]]) step (%[[C1]]) {

// schedule=static: equal blocks of rows, no chunk and no run-time call.
// STATIC-NOT: omp_get_num_threads
// STATIC-LABEL: func.func @row_loop
// STATIC: omp.parallel if(%{{.*}}) num_threads(%{{.*}} : i32) {
// STATIC-NEXT: omp.wsloop schedule(static) {

// serial-below=0: no if clause.
// ALWAYS-LABEL: func.func @row_loop
// ALWAYS-NOT: arith.cmpi
// ALWAYS: omp.parallel num_threads(%{{.*}} : i32) {

// Fixed chunk and thread count: options win over the target.
// FIXED-LABEL: func.func @row_loop
// FIXED: %[[NT:.*]] = arith.constant 3 : i32
// FIXED: omp.parallel if(%{{.*}}) num_threads(%[[NT]] : i32) {
// FIXED-NEXT: %[[CHUNK:.*]] = arith.constant 64 : i32
// FIXED-NEXT: omp.wsloop schedule(guided = %[[CHUNK]] : i32) {
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 4>}} {
  func.func @row_loop(%y: memref<?xf32>, %m: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.0 : f32
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) {
          memref.store %one, %y[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// A loop over tiles of 64 rows (sparse-iter-guard-coordinates): chunks of at
// most 256 rows are at most 4 tiles.
// CHECK-LABEL: func.func @tile_loop
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: func.call @omp_get_num_threads()
// CHECK: %[[TRIPS:.*]] = arith.ceildivsi %{{.*}}, %[[C64]] : index
// CHECK: %[[EACH:.*]] = arith.ceildivsi %[[TRIPS]], %{{.*}} : index
// CHECK: %[[LOW:.*]] = arith.maxsi %[[EACH]], %{{.*}} : index
// CHECK: %[[CAP:.*]] = arith.constant 4 : index
// CHECK: arith.minsi %[[LOW]], %[[CAP]] : index
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 2>}} {
  func.func @tile_loop(%y: memref<?xf32>, %m: index) {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %one = arith.constant 1.0 : f32
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%t) : index = (%c0) to (%m) step (%c64) {
          memref.store %one, %y[%t] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// A target with threads = 0 leaves the thread count to libomp (OMP_NUM_THREADS).
// CHECK-LABEL: func.func @runtime_threads
// CHECK: omp.parallel if(%{{.*}}) {
// CHECK: omp.wsloop schedule(dynamic = %{{.*}} : i32) {
// FIXED-LABEL: func.func @runtime_threads
// FIXED: omp.parallel if(%{{.*}}) num_threads(%{{.*}} : i32) {
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0>}} {
  func.func @runtime_threads(%y: memref<?xf32>, %m: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.0 : f32
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) {
          memref.store %one, %y[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// Each function takes the threads of the target it names.
// CHECK-LABEL: func.func @named_target
// CHECK: %[[NT:.*]] = arith.constant 8 : i32
// CHECK: omp.parallel if(%{{.*}}) num_threads(%[[NT]] : i32) {
module attributes {sparse_iter.targets = {small = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 2>,
                                          big = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 8>}} {
  func.func @named_target(%y: memref<?xf32>, %m: index) attributes {sparse_iter.target = "big"} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.0 : f32
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) {
          memref.store %one, %y[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// Bounds computed inside the region: no if clause (it would be computed before them).
// CHECK-LABEL: func.func @bounds_inside
// CHECK-NOT: arith.cmpi
// CHECK: omp.parallel num_threads(%{{.*}} : i32) {
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 4>}} {
  func.func @bounds_inside(%y: memref<?xf32>) {
    %one = arith.constant 1.0 : f32
    omp.parallel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %m = memref.dim %y, %c0 : memref<?xf32>
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) {
          memref.store %one, %y[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// Iterations that allocate (each packs its own panel of an operand) are the
// whole work however few they are: no if clause.
// CHECK-LABEL: func.func @panel_loop
// CHECK-NOT: arith.cmpi
// CHECK: omp.parallel num_threads(%{{.*}} : i32) {
// CHECK: memref.alloc
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 4>}} {
  func.func @panel_loop(%y: memref<?xf32>, %m: index, %width: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.0 : f32
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) {
          %panel = memref.alloc(%width) : memref<?xf32>
          memref.store %one, %panel[%c0] : memref<?xf32>
          %v = memref.load %panel[%c0] : memref<?xf32>
          memref.store %v, %y[%i] : memref<?xf32>
          memref.dealloc %panel : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// A schedule or thread count already there is kept.
// CHECK-LABEL: func.func @negative_already_set
// CHECK: %[[NT:.*]] = arith.constant 5 : i32
// CHECK: omp.parallel num_threads(%[[NT]] : i32) {
// CHECK-NEXT: omp.wsloop schedule(static) {
// CHECK-NOT: omp_get_num_threads
module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 4>}} {
  func.func @negative_already_set(%y: memref<?xf32>, %m: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %nt = arith.constant 5 : i32
    %one = arith.constant 1.0 : f32
    omp.parallel num_threads(%nt : i32) {
      omp.wsloop schedule(static) {
        omp.loop_nest (%i) : index = (%c0) to (%m) step (%c1) {
          memref.store %one, %y[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}
