// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-clone-per-target
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-clone-per-target=target=bogus 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: sparse-iter-clone-per-target: unknown target 'bogus': expected 'host' or a name from the module's sparse_iter.targets

// A call cycle of private functions reached from two targets: copying it
// per target is not supported; the error asks for explicit targets.
module attributes {sparse_iter.targets = {
    x = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    y = #sparse_iter.cpu<x86_64, features = [], vector_bits = 0, threads = 1>}} {
  // expected-error@+1 {{'ping' is in a call cycle reached from targets x, y; sparse-iter-clone-per-target copies acyclic calls only: give the functions of the cycle a sparse_iter.target}}
  func.func private @ping(%n: index) -> index {
    %0 = call @pong(%n) : (index) -> index
    return %0 : index
  }
  func.func private @pong(%n: index) -> index {
    %0 = call @ping(%n) : (index) -> index
    return %0 : index
  }
  func.func @from_x(%n: index) -> index attributes {sparse_iter.target = "x"} {
    %0 = call @ping(%n) : (index) -> index
    return %0 : index
  }
  func.func @from_y(%n: index) -> index attributes {sparse_iter.target = "y"} {
    %0 = call @pong(%n) : (index) -> index
    return %0 : index
  }
}
