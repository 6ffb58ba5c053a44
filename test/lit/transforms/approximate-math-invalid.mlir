// RUN: not sparsecomp-opt %s --sparse-iter-approximate-math='ops=tanh' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sparsecomp-opt %s --sparse-iter-approximate-math='ops=erf,exp' 2>&1 | FileCheck %s --check-prefix=LIST

// Only erf has an approximation so far; an op it does not know is refused.
// UNKNOWN: ops must name math ops among erf, got 'tanh'
// UNKNOWN-NOT: Traceback
// LIST: ops must name math ops among erf, got 'erf,exp'
func.func @f(%x: f32) -> f32 {
  %e = math.tanh %x : f32
  return %e : f32
}
