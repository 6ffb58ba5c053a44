// Input from stdin or a file, output to stdout or -o, printing options.

// RUN: sparsecomp-opt < %s | FileCheck %s
// RUN: sparsecomp-opt %s -o %t && FileCheck %s < %t
// RUN: sparsecomp-opt %s | sparsecomp-opt | FileCheck %s
// CHECK-LABEL: func.func @id
// CHECK: return %arg0

// RUN: sparsecomp-opt %s --mlir-print-debuginfo | FileCheck %s --check-prefix=LOC
// LOC: loc("{{.*}}opt-io.mlir":[[# @LINE + 12]]:3)

// RUN: sparsecomp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// GENERIC: "func.return"

// RUN: sparsecomp-opt %s --mlir-print-ir-after-all --pass-pipeline='builtin.module(sparse-iter-verify, cse)' 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// AFTER: IR Dump After VerifyPass (sparse-iter-verify)
// AFTER: IR Dump After CSE (cse)

// RUN: sparsecomp-opt --list-passes | FileCheck %s --check-prefix=LIST
// LIST: sparse-iter-fold-encodings: Fold round trips
func.func @id(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  return %arg0 : tensor<?xf32>
}
