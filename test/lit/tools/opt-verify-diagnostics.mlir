// --verify-diagnostics fails when an expected diagnostic is missing or an
// unexpected one appears, and names the place.

// RUN: sparsecomp-opt %S/Inputs/expected-ok.mlir --verify-diagnostics
// RUN: not sparsecomp-opt %S/Inputs/expected-missing.mlir --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: expected-missing.mlir:2:4: error: expected error "this error never happens" was not produced
// RUN: not sparsecomp-opt %S/Inputs/expected-unexpected.mlir --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=UNEXPECTED
// UNEXPECTED: expected-unexpected.mlir:3:1: error: unexpected error: singleton level 0 must follow a nonunique compressed, loose_compressed or singleton level

func.func @f() {
  return
}
