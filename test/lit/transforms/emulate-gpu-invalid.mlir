// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-emulate-gpu

// Shuffles within segments narrower than a warp are not emulated.
func.func @shuffle(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : i32
  %f = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %o = arith.constant 1 : i32
    // expected-error@+1 {{sparse-iter-emulate-gpu: gpu.shuffle is emulated for a width of 32 lanes only}}
    %s, %ok = gpu.shuffle xor %f, %o, %c16 : f32
    gpu.terminator
  }
  return
}

// -----

// Block reductions are refused at the op.
func.func @all_reduce(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error@+1 {{sparse-iter-emulate-gpu: 'gpu.all_reduce' makes threads wait for each other; the emulation runs them one after the other and does not support it yet}}
    %s = gpu.all_reduce add %f uniform {} : (f32) -> f32
    gpu.terminator
  }
  return
}

// -----

// A collective inside a loop other than scf.for has no phases.
func.func @while_barrier(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %false = arith.constant false
    // expected-error@+1 {{sparse-iter-emulate-gpu: a collective inside 'scf.while' is not emulated}}
    scf.while : () -> () {
      gpu.barrier
      scf.condition(%false)
    } do {
      scf.yield
    }
    gpu.terminator
  }
  return
}

// -----

// Threads of one group disagreeing on whether to meet is a bug in the kernel;
// bounds taken straight from the thread id are refused.
func.func @divergent(%y: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    // expected-error@+1 {{sparse-iter-emulate-gpu: the bounds or condition around a collective use the thread id}}
    scf.for %i = %c0 to %tx step %c1 {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Private memory attributions are not emulated.
func.func @private_memory(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  // expected-error@+1 {{sparse-iter-emulate-gpu: launches with private memory attributions are not emulated}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             private(%buf : memref<4xf32, #gpu.address_space<private>>) {
    gpu.terminator
  }
  return
}

// -----

// A view of workgroup memory names its memory space in its type: refused.
func.func @shared_view(%y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<32xf32, #gpu.address_space<workgroup>>) {
    // expected-error@+1 {{sparse-iter-emulate-gpu: 'memref.subview' on workgroup memory is not emulated}}
    %v = memref.subview %buf[0] [8] [1] : memref<32xf32, #gpu.address_space<workgroup>> to memref<8xf32, strided<[1]>, #gpu.address_space<workgroup>>
    gpu.terminator
  }
  return
}

// -----

// Workgroup memory allocated inside a loop: not one buffer per block.
func.func @shared_in_loop(%y: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %n step %c1 {
      // expected-error@+1 {{sparse-iter-emulate-gpu: workgroup memory allocated inside a loop or branch}}
      %t = memref.alloc() : memref<8xf32, #gpu.address_space<workgroup>>
    }
    gpu.terminator
  }
  return
}

// -----

// A copy's token waited on through nvgpu's group ops: the kernels use NVVM's.
func.func @async_token(%x: memref<?xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<8xf16, #gpu.address_space<workgroup>>) {
    %t = nvgpu.device_async_copy %x[%c0], %buf[%c0], 8 : memref<?xf16> to memref<8xf16, #gpu.address_space<workgroup>>
    // expected-error@+1 {{sparse-iter-emulate-gpu: 'nvgpu.device_async_create_group' is not emulated (use the nvvm.cp.async group ops)}}
    %g = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %g
    gpu.terminator
  }
  return
}
