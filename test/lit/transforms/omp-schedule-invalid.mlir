// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-omp-schedule

// threads from the target, but the module has two and the function names none.
module attributes {sparse_iter.targets = {a = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 2>,
                                          b = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 4>}} {
  func.func @which_target(%y: memref<?xf32>, %m: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.0 : f32
    // expected-error@+1 {{sparse-iter-omp-schedule: no sparse_iter.target on this function and the module has several targets (a, b)}}
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
