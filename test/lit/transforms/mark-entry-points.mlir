// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-mark-entry-points)' | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-mark-entry-points, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map})' | FileCheck %s --check-prefix=BUF --enable-var-scope

// Tensor arguments of public functions become read-only; other arguments and
// existing argument attributes are kept; the function gets the C interface.
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%{{.*}}: tensor<?xf32> {bufferization.writable = false, test.keep},
// CHECK-SAME: %{{.*}}: index,
// CHECK-SAME: %{{.*}}: tensor<4xi32> {bufferization.writable = false}) -> index
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func @kernel(%x: tensor<?xf32> {test.keep}, %n: index, %y: tensor<4xi32>) -> index {
  return %n : index
}

// -----

// Private functions and declarations are left alone.
// CHECK-LABEL: func.func private @helper(%{{.*}}: tensor<?xf32>) -> tensor<?xf32> {
// CHECK-LABEL: func.func private @external(tensor<?xf32>)
// CHECK-NOT: llvm.emit_c_interface
func.func private @helper(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
func.func private @external(tensor<?xf32>)

// -----

// An explicit `bufferization.writable = false` is accepted as it is.
// CHECK-LABEL: func.func public @already_read_only
// CHECK-SAME: {bufferization.writable = false}) attributes {llvm.emit_c_interface}
func.func public @already_read_only(%x: tensor<?xf32> {bufferization.writable = false}) {
  return
}

// -----

// Writing into an argument makes bufferization copy it first: the caller's
// array is never written.
// BUF-LABEL: func.func @scale_in_place
// BUF-SAME: (%[[X:.*]]: memref<?xf32>, %[[I:.*]]: index) -> memref<?xf32>
// BUF: %[[COPY:.*]] = memref.alloc
// BUF: memref.copy %[[X]], %[[COPY]]
// BUF: memref.store %{{.*}}, %[[COPY]][%[[I]]]
// BUF: return %[[COPY]]
func.func @scale_in_place(%x: tensor<?xf32>, %i: index) -> tensor<?xf32> {
  %one = arith.constant 1.0 : f32
  %y = tensor.insert %one into %x[%i] : tensor<?xf32>
  return %y : tensor<?xf32>
}
