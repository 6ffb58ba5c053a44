// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=1' 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=65' 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=eight' 2>&1 | FileCheck %s --check-prefix=WORD

// The pass reports no error of its own (a loop it does not take is left as it
// is); its option is checked.
// ONE: lanes must be -1 (the target's), 0 (off) or 2-64, got 1
// WIDE: lanes must be -1 (the target's), 0 (off) or 2-64, got 65
// WORD: error: invalid value 'eight' for option 'lanes'
// WORD-NOT: Traceback
func.func @f() {
  return
}
