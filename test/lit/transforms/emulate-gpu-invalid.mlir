// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-emulate-gpu

// Threads that wait for each other cannot run one after the other.
func.func @barrier(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error@+1 {{sparse-iter-emulate-gpu: 'gpu.barrier' makes threads wait for each other; the emulation runs them one after the other and does not support it yet}}
    gpu.barrier
    gpu.terminator
  }
  return
}

// -----

// Workgroup memory is not emulated.
func.func @shared(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  // expected-error@+1 {{sparse-iter-emulate-gpu: launches with workgroup or private memory are not emulated}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<32xf32, #gpu.address_space<workgroup>>) {
    gpu.terminator
  }
  return
}
