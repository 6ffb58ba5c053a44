// RUN: sparsecomp-opt %s --sparse-iter-pack-entry-points | FileCheck %s
// RUN: sparsecomp-opt %s --sparse-iter-pack-entry-points --sparse-iter-pack-entry-points | FileCheck %s --check-prefix=TWICE

// Each C entry point with an ABI gets a packed form: parameter i is loaded
// from *args[i]; a returned value is stored to *args[n].
module {
  // CHECK-LABEL: llvm.func @_mlir_ciface_f(
  llvm.func @_mlir_ciface_f(%a: !llvm.ptr, %n: i64, %x: f32, %b: i1) -> f32 attributes {sparse_iter.abi = "{}"} {
    llvm.return %x : f32
  }
  // CHECK-LABEL: llvm.func @_sparsecomp_packed_f(
  // CHECK-SAME: %[[ARGS:.*]]: !llvm.ptr) attributes {sparse_iter.packed}
  // CHECK: %[[G0:.*]] = llvm.getelementptr %[[ARGS]][0]
  // CHECK: %[[P0:.*]] = llvm.load %[[G0]] : !llvm.ptr -> !llvm.ptr
  // CHECK: %[[A:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
  // CHECK: llvm.getelementptr %[[ARGS]][1]
  // CHECK: %[[N:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
  // CHECK: llvm.getelementptr %[[ARGS]][2]
  // CHECK: %[[X:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
  // CHECK: llvm.getelementptr %[[ARGS]][3]
  // CHECK: %[[B:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i1
  // CHECK: %[[G4:.*]] = llvm.getelementptr %[[ARGS]][4]
  // CHECK: %[[P4:.*]] = llvm.load %[[G4]] : !llvm.ptr -> !llvm.ptr
  // CHECK: %[[R:.*]] = llvm.call @_mlir_ciface_f(%[[A]], %[[N]], %[[X]], %[[B]]) : (!llvm.ptr, i64, f32, i1) -> f32
  // CHECK: llvm.store %[[R]], %[[P4]] : f32, !llvm.ptr
  // CHECK: llvm.return

  // A result struct travels by pointer: nothing is stored after the call.
  // CHECK-LABEL: llvm.func @_sparsecomp_packed_g(
  // CHECK: llvm.call @_mlir_ciface_g(%{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr) -> ()
  // CHECK-NEXT: llvm.return
  llvm.func @_mlir_ciface_g(%out: !llvm.ptr, %a: !llvm.ptr) attributes {sparse_iter.abi = "{}"} {
    llvm.return
  }

  // A name that is no bare identifier (func.func @"row sums") is quoted.
  // CHECK-LABEL: llvm.func @"_sparsecomp_packed_row sums"(
  // CHECK: llvm.call @"_mlir_ciface_row sums"(%{{.*}}) : (!llvm.ptr) -> ()
  llvm.func @"_mlir_ciface_row sums"(%a: !llvm.ptr) attributes {sparse_iter.abi = "{}"} {
    llvm.return
  }

  // No ABI (not called by the runtime) or no body: no packed form.
  // CHECK-NOT: @_sparsecomp_packed_h
  // CHECK-NOT: @_sparsecomp_packed_d
  llvm.func @_mlir_ciface_h(%a: !llvm.ptr) {
    llvm.return
  }
  llvm.func @_mlir_ciface_d(!llvm.ptr) attributes {sparse_iter.abi = "{}"}
}

// Run twice, the pass adds nothing the second time.
// TWICE-COUNT-1: llvm.func @_sparsecomp_packed_f(
// TWICE-NOT: llvm.func @_sparsecomp_packed_f(
