// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-parallelize

func.func @mark_on_while(%m: index) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{'sparse_iter.parallel' marks scf.for loops only, not 'scf.while'}}
  %r = scf.while (%i = %c0) : (index) -> index {
    %go = arith.cmpi slt, %i, %m : index
    scf.condition(%go) %i : index
  } do {
  ^bb0(%i: index):
    scf.yield %i : index
  } attributes {sparse_iter.parallel}
  return
}

// -----

func.func @mark_not_unit(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  // expected-error@+1 {{'sparse_iter.parallel' must be a unit attribute}}
  scf.for %i = %c0 to %m step %c1 {
    memref.store %one, %y[%i] : memref<?xf32>
  } {sparse_iter.parallel = true}
  return
}

// -----

// The pass runs after bufferization; a marked loop on tensors is a pipeline error.
func.func @mark_on_tensors(%y: tensor<?xf32>, %m: index) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  // expected-error@+1 {{a 'sparse_iter.parallel' loop still carries tensors: sparse-iter-parallelize runs after bufferization}}
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%t = %y) -> (tensor<?xf32>) {
    %t2 = tensor.insert %one into %t[%i] : tensor<?xf32>
    scf.yield %t2 : tensor<?xf32>
  } {sparse_iter.parallel}
  return %r : tensor<?xf32>
}
