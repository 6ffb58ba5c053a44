// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-safe-division | FileCheck %s

// A signed division by a value: 1 where the divisor is 0 or MIN / -1 would
// overflow, and 0 where it was 0.
// CHECK-LABEL: func.func @signed
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: %[[BY0:.*]] = arith.cmpi eq, %[[B:.*]], %[[ZERO]] : i32
// CHECK: %[[D0:.*]] = arith.select %[[BY0]], %[[ONE]], %[[B]] : i32
// CHECK-DAG: %[[MINUS:.*]] = arith.constant -1 : i32
// CHECK-DAG: %[[MIN:.*]] = arith.constant -2147483648 : i32
// CHECK: %[[M1:.*]] = arith.cmpi eq, %[[B]], %[[MINUS]] : i32
// CHECK: %[[AM:.*]] = arith.cmpi eq, %[[A:.*]], %[[MIN]] : i32
// CHECK: %[[OVF:.*]] = arith.andi %[[M1]], %[[AM]] : i1
// CHECK: %[[D:.*]] = arith.select %[[OVF]], %[[ONE]], %[[D0]] : i32
// CHECK: %[[Q:.*]] = arith.divsi %[[A]], %[[D]] : i32
// CHECK: %[[R:.*]] = arith.select %[[BY0]], %[[ZERO]], %[[Q]] : i32
// CHECK: return %[[R]]
func.func @signed(%a: i32, %b: i32) -> i32 {
  %q = arith.divsi %a, %b : i32
  return %q : i32
}

// -----

// Unsigned remainders of vectors: splat constants, no overflow case.
// CHECK-LABEL: func.func @unsigned_vector
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0> : vector<8xi64>
// CHECK-DAG: %[[ONE:.*]] = arith.constant dense<1> : vector<8xi64>
// CHECK: %[[BY0:.*]] = arith.cmpi eq, %{{.*}}, %[[ZERO]] : vector<8xi64>
// CHECK: %[[D:.*]] = arith.select %[[BY0]], %[[ONE]], %{{.*}} : vector<8xi1>, vector<8xi64>
// CHECK-NOT: arith.andi
// CHECK: %[[Q:.*]] = arith.remui %{{.*}}, %[[D]] : vector<8xi64>
// CHECK: arith.select %[[BY0]], %[[ZERO]], %[[Q]] : vector<8xi1>, vector<8xi64>
func.func @unsigned_vector(%a: vector<8xi64>, %b: vector<8xi64>) -> vector<8xi64> {
  %r = arith.remui %a, %b : vector<8xi64>
  return %r : vector<8xi64>
}

// -----

// Constant divisors without 0 (or -1, signed) cannot trap: left as they are,
// as the lowering's block-size arithmetic is. A constant -1 is guarded.
// CHECK-LABEL: func.func @constants
// CHECK: arith.divsi %{{.*}}, %{{.*}} : index
// CHECK-NEXT: arith.remui %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK-NOT: arith.remui
// CHECK: arith.cmpi eq
// CHECK: arith.divsi
// CHECK: arith.select
func.func @constants(%i: index, %v: vector<4xi32>, %x: i16) -> (index, vector<4xi32>, i16) {
  %c4 = arith.constant 4 : index
  %c3 = arith.constant dense<3> : vector<4xi32>
  %cm1 = arith.constant -1 : i16
  %q = arith.divsi %i, %c4 : index
  %r = arith.remui %v, %c3 : vector<4xi32>
  %n = arith.divsi %x, %cm1 : i16
  return %q, %r, %n : index, vector<4xi32>, i16
}

// -----

// Wider than 64 bits: MIN is built as 1 << 127 (an attribute of the bindings holds 64).
// CHECK-LABEL: func.func @wide
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i128
// CHECK-DAG: %[[SHIFT:.*]] = arith.constant 127 : i128
// CHECK: arith.shli %[[ONE]], %[[SHIFT]] : i128
// CHECK: arith.divsi
func.func @wide(%a: i128, %b: i128) -> i128 {
  %c = arith.divsi %a, %b : i128
  return %c : i128
}
