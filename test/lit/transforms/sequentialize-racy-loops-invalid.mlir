// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-sequentialize-racy-loops

// A loop with a reduction that may also race: refused (the upstream driver then
// builds its functions without parallel loops).
func.func @reduction(%n: index, %crd: memref<?xindex>, %y: memref<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  // expected-error@+1 {{this parallel loop has reductions and may write one element from several iterations (memref.store at}}
  %r = scf.parallel (%j) = (%c0) to (%n) step (%c1) init (%z) -> f64 {
    %i = memref.load %crd[%j] : memref<?xindex>
    memref.store %z, %y[%i] : memref<?xf64>
    scf.reduce(%z : f64) {
    ^bb0(%a: f64, %b: f64):
      %s = arith.addf %a, %b : f64
      scf.reduce.return %s : f64
    }
  }
  return %r : f64
}
