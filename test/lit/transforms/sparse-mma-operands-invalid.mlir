// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-sparse-mma-operands

// The pass reports no error of its own (an operand it does not take is left
// as it is); a function's target must exist.
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  // expected-error @+1 {{unknown target 'tpu'; the module's sparse_iter.targets has: gpu}}
  func.func @f(%a: tensor<?x?xf16>) -> tensor<?x?xf16> attributes {sparse_iter.target = "tpu"} {
    return %a : tensor<?x?xf16>
  }
}
