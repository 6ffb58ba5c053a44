// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-specialize-encodings
// An unknown target option is reported at the module (an input of its own, as it
// would fail every case here).
// RUN: sparsecomp-opt %S/Inputs/specialize-encodings-target.mlir --verify-diagnostics --sparse-iter-specialize-encodings='target=tpu'
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-specialize-encodings='densify=maybe' 2>&1 | FileCheck %s --check-prefix=OPTION

// OPTION: error: invalid value 'maybe' for option 'densify': expected true or false

// Encodings the resolver cannot lay out are errors where the type appears.
#block = #sparse_iter.sparsity<block[2, 2], density = 0.5>
// expected-error@+1 {{cannot resolve a layout for tensor<?x?x?xf32, #sparse_iter.sparsity<block[2, 2], density = 0.5>>: 'block' sparsity needs a rank-2 tensor, got rank 3}}
func.func private @negative_block_rank3(tensor<?x?x?xf32, #block>)

// -----

// expected-error@+1 {{'ragged' sparsity needs a rank-2 tensor, got rank 1}}
func.func private @negative_ragged_rank1(tensor<?xf32, #sparse_iter.sparsity<ragged>>)

// -----

// expected-error@+1 {{a rank-0 tensor has no sparse layout; drop its encoding}}
func.func private @negative_scalar(tensor<f32, #sparse_iter.sparsity<unstructured>>)

// -----

// A hand-written #encoding whose map does not fit the tensor.
#s = #sparse_iter.sparsity<unstructured>
// expected-error@+1 {{the indexing map of operand 0 of 'linalg.matvec' has 2 results but the tensor has rank 1}}
func.func private @negative_map_rank(tensor<?xf32, #sparse_iter.encoding<#s, op_name = "linalg.matvec", operand = 0, element_types = [f32, f32, f32], indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>]>>)

// -----

// An op result: the error is at the op.
#s = #sparse_iter.sparsity<block[4, 4], density = 0.5>
func.func @negative_op_result(%n: index) -> index {
  // expected-error@+1 {{'block' sparsity needs a rank-2 tensor, got rank 1}}
  %e = tensor.empty(%n) : tensor<?xf32, #s>
  %c0 = arith.constant 0 : index
  %d = tensor.dim %e, %c0 : tensor<?xf32, #s>
  return %d : index
}

// -----

// Unresolved encodings cannot be carried through scf.for iter_args ...
#sp = #sparse_iter.sparsity<unstructured, density = 0.1>
func.func @negative_loop(%a: tensor<?x?xf32, #sp>, %n: index) -> tensor<?x?xf32, #sp> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error@+1 {{cannot specialize encodings carried through 'scf.for' (results or region arguments); only func.func and linalg regions may carry unresolved encodings}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%t = %a) -> (tensor<?x?xf32, #sp>) {
    scf.yield %t : tensor<?x?xf32, #sp>
  }
  return %r : tensor<?x?xf32, #sp>
}

// -----

// ... nor through branch arguments.
#sp = #sparse_iter.sparsity<unstructured, density = 0.1>
// expected-error@+1 {{cannot specialize encodings of block arguments other than the function's own; branch operands must keep matching types}}
func.func @negative_branch(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> {
  cf.br ^next(%a : tensor<?x?xf32, #sp>)
^next(%t: tensor<?x?xf32, #sp>):
  return %t : tensor<?x?xf32, #sp>
}

// -----

// With several targets, a function must say which one it is for.
module attributes {sparse_iter.targets = {a = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0>, b = #sparse_iter.cuda<sm_80, mma_shapes = [], sparse_mma_shapes = []>}} {
  // expected-error@+1 {{no sparse_iter.target on this function and the module has several targets (a, b); name one on the function (attributes {sparse_iter.target = "NAME"}), or, in sparsecomp-opt, pass the option target=NAME of sparse-iter-specialize-encodings}}
  func.func private @negative_which(tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.1>>)
}

// -----

// An op's own target must be one of the module's.
#sp = #sparse_iter.sparsity<unstructured>
module attributes {sparse_iter.targets = {
    cpu = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>}} {
  func.func @negative_op_target(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    // expected-error@+1 {{unknown target 'tpu'; the module's sparse_iter.targets has: cpu}}
    %0 = linalg.matmul {sparse_iter.target = "tpu"}
         ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
}
