// Bad input: one located line on stderr, exit code 1, never a traceback.

// RUN: not sparsecomp-opt %S/Inputs/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: sparsecomp-opt: error: cannot read input file '{{.*}}does-not-exist.mlir': No such file or directory
// MISSING-NOT: Traceback

// RUN: printf 'func.func @f() {\n  return\n}\n\377\n' | not sparsecomp-opt - 2>&1 | FileCheck %s --check-prefix=NOTUTF8
// NOTUTF8: sparsecomp-opt: error: cannot read standard input: 'utf-8' codec can't decode byte 0xff
// NOTUTF8-NOT: Traceback

// RUN: not sparsecomp-opt %S/Inputs/garbage.mlir 2>&1 | FileCheck %s --check-prefix=GARBAGE
// GARBAGE: garbage.mlir:1:1: error: custom op 'this' is unknown
// GARBAGE-NOT: Traceback

// RUN: not sparsecomp-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: <pass-pipeline>:1:16: error: unknown pass 'no-such-pass'; sparsecomp passes: sparse-iter-approximate-math, {{.*}}, sparse-iter-wrap-upstream
// UNKNOWN-NOT: Traceback

// RUN: not sparsecomp-opt %s --sparse-iter-fold-encoding 2>&1 | FileCheck %s --check-prefix=CLOSE
// CLOSE: error: unknown pass 'sparse-iter-fold-encoding'; did you mean 'sparse-iter-fold-encodings'?

// RUN: not sparsecomp-opt %s --pass-pipeline='builtin.module(canonicalize{max-iterations=abc})' 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: <pass-pipeline>:1:16: error: pass 'canonicalize': invalid value 'abc' for option 'max-iterations'
// BADOPT-NOT: Traceback

// RUN: not sparsecomp-opt %s --pass-pipeline='builtin.module(cse' 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: <pass-pipeline>:1:19: error: expected ')'

// RUN: not sparsecomp-opt %s --no-such-flag-either=1 --pass-pipeline='builtin.module(cse)' 2>&1 | FileCheck %s --check-prefix=MIXED
// MIXED: sparsecomp-opt: error: use either --pass-pipeline or per-pass flags, not both

// The verifier's own errors for a malformed annotation.
// RUN: not sparsecomp-opt %S/Inputs/bad-annotation.mlir --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=ANNOT
// ANNOT: bad-annotation.mlir:1:4: error:

func.func @f() {
  return
}
