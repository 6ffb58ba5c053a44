// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-approximate-math | FileCheck %s --enable-var-scope

// A vector of f32: clamped to [-4, 4], a rational function of x^2 (numerator
// and denominator by Horner's rule, contractible into FMAs), clamped to [-1, 1].
// CHECK-LABEL: func.func @vector
// CHECK-SAME: (%[[X:.*]]: vector<16xf32>)
// CHECK-NOT: math.erf
// CHECK-DAG: %[[EDGE:.*]] = arith.constant dense<4.000000e+00> : vector<16xf32>
// CHECK-DAG: %[[NEDGE:.*]] = arith.constant dense<-4.000000e+00> : vector<16xf32>
// CHECK: %[[LO:.*]] = arith.maximumf %[[X]], %[[NEDGE]] : vector<16xf32>
// CHECK: %[[C:.*]] = arith.minimumf %[[LO]], %[[EDGE]] : vector<16xf32>
// CHECK: %[[S:.*]] = arith.mulf %[[C]], %[[C]] : vector<16xf32>
// CHECK: arith.mulf %{{.*}}, %[[S]] fastmath<contract> : vector<16xf32>
// CHECK: %[[P0:.*]] = arith.constant dense<1.12837923> : vector<16xf32>
// CHECK: %[[NUM:.*]] = arith.addf %{{.*}}, %[[P0]] fastmath<contract> : vector<16xf32>
// CHECK: %[[CNUM:.*]] = arith.mulf %[[C]], %[[NUM]] : vector<16xf32>
// CHECK: %[[Q0:.*]] = arith.constant dense<1.000000e+00> : vector<16xf32>
// CHECK: %[[DEN:.*]] = arith.addf %{{.*}}, %[[Q0]] fastmath<contract> : vector<16xf32>
// CHECK: %[[R:.*]] = arith.divf %[[CNUM]], %[[DEN]] : vector<16xf32>
// CHECK: %[[RLO:.*]] = arith.maximumf %[[R]], %{{.*}} : vector<16xf32>
// CHECK: %[[OUT:.*]] = arith.minimumf %[[RLO]], %{{.*}} : vector<16xf32>
// CHECK: return %[[OUT]]
func.func @vector(%x: vector<16xf32>) -> vector<16xf32> {
  %e = math.erf %x : vector<16xf32>
  return %e : vector<16xf32>
}

// -----

// A scalar f32 is approximated the same way; f64 (libm's accuracy expected)
// and f16 are left to libm.
// CHECK-LABEL: func.func @scalars
// CHECK-NOT: math.erf {{.*}} : f32
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: math.erf %{{.*}} : f64
// CHECK: math.erf %{{.*}} : f16
func.func @scalars(%x: f32, %y: f64, %z: f16) -> (f32, f64, f16) {
  %a = math.erf %x : f32
  %b = math.erf %y : f64
  %c = math.erf %z : f16
  return %a, %b, %c : f32, f64, f16
}

// -----

// Inside a loop body (a vectorized GELU): the erf is rewritten in place.
// CHECK-LABEL: func.func @gelu
// CHECK: scf.for
// CHECK-NOT: math.erf
// CHECK: arith.divf
// CHECK: vector.transfer_write
func.func @gelu(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %pad = arith.constant 0.0 : f32
  %half = arith.constant dense<0.5> : vector<16xf32>
  %one = arith.constant dense<1.0> : vector<16xf32>
  %r2 = arith.constant dense<0.707106769> : vector<16xf32>
  scf.for %i = %c0 to %n step %c16 {
    %v = vector.transfer_read %x[%i], %pad : memref<?xf32>, vector<16xf32>
    %s = arith.mulf %v, %r2 : vector<16xf32>
    %e = math.erf %s : vector<16xf32>
    %p = arith.addf %one, %e : vector<16xf32>
    %h = arith.mulf %v, %half : vector<16xf32>
    %g = arith.mulf %h, %p : vector<16xf32>
    vector.transfer_write %g, %x[%i] : vector<16xf32>, memref<?xf32>
  }
  return
}
