// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-cpu-function-targets

// A function for a CUDA target cannot be compiled by the CPU back end.
module attributes {sparse_iter.targets = {
    cpu = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32]>}} {
  // expected-error@+1 {{'on_gpu' is for the #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32]> target 'gpu', which the CPU back end cannot compile}}
  llvm.func @on_gpu() attributes {sparse_iter.target = "gpu"} {
    llvm.return
  }
}

// -----

// One library holds every target's code: CPU targets of two architectures are
// refused at the module (sparsecomp-opt accepted them, the compile failed later).
// expected-error@+1 {{sparse-iter-cpu-function-targets: one module's CPU targets must share an architecture, got aarch64, x86_64}}
module attributes {sparse_iter.targets = {
    wide = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    arm = #sparse_iter.cpu<aarch64, features = [neon], vector_bits = 128, threads = 0>}} {
  llvm.func @on_arm() attributes {sparse_iter.target = "arm"} {
    llvm.return
  }
}
