// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// Upstream dialects a program uses around its kernels lower with the rest:
// n-D vectors (their unrolling creates ub.poison), complex, math and index.

// CHECK-LABEL: vectors
// CHECK-NEXT: ( ( 1, 0, 2 ), ( 0, 5, 3.5 ) )
// CHECK-NEXT: ( ( 1, 0 ), ( 0, 5 ), ( 2, 3.5 ) )
// CHECK-NEXT: ( ( 5, 7 ), ( 7, 37.25 ) )
func.func @vectors() {
  vector.print str "vectors\n"
  %d = arith.constant dense<[[1.0, 0.0, 2.0], [0.0, 5.0, 3.5]]> : tensor<2x3xf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %d[%c0, %c0], %pad : tensor<2x3xf32>, vector<2x3xf32>
  vector.print %v : vector<2x3xf32>
  %t = vector.transpose %v, [1, 0] : vector<2x3xf32> to vector<3x2xf32>
  vector.print %t : vector<3x2xf32>
  %acc = arith.constant dense<0.0> : vector<2x2xf32>
  %m = vector.contract {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>,
                                         affine_map<(i, j, k) -> (i, j)>],
                        iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>}
      %v, %t, %acc : vector<2x3xf32>, vector<3x2xf32> into vector<2x2xf32>
  vector.print %m : vector<2x2xf32>
  return
}

// |(1 + 2i) exp(1 + 2i)| = sqrt(5) e; its real part is e (cos 2 - 2 sin 2).
// CHECK-LABEL: complex
// CHECK-NEXT: 6.07826
// CHECK-NEXT: -6.07466
func.func @complex() {
  vector.print str "complex\n"
  %a = complex.constant [1.0, 2.0] : complex<f64>
  %b = complex.exp %a : complex<f64>
  %c = complex.mul %a, %b : complex<f64>
  %abs = complex.abs %c : complex<f64>
  %re = complex.re %c : complex<f64>
  vector.print %abs : f64
  vector.print %re : f64
  return
}

// CHECK-LABEL: math_index
// CHECK-NEXT: 4
// CHECK-NEXT: 27
// CHECK-NEXT: 3
func.func @math_index() {
  vector.print str "math_index\n"
  %x = arith.constant 2.0 : f64
  %three = arith.constant 3 : i32
  %p = math.powf %x, %x : f64
  %ip = math.ipowi %three, %three : i32
  vector.print %p : f64
  vector.print %ip : i32
  %a = index.constant 7
  %b = index.constant 2
  %q = index.floordivs %a, %b
  %r = index.maxs %q, %b
  vector.print %r : index
  return
}

func.func @main() {
  call @vectors() : () -> ()
  call @complex() : () -> ()
  call @math_index() : () -> ()
  return
}
