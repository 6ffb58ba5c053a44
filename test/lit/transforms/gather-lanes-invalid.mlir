// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=1' 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=65' 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=6' 2>&1 | FileCheck %s --check-prefix=SIX
// RUN: not sparsecomp-opt %s --sparse-iter-gather-lanes='lanes=eight' 2>&1 | FileCheck %s --check-prefix=WORD

// The pass reports no error of its own (a loop it does not take is left as it
// is); its option is checked.
// ONE: lanes must be -1 (the target's), 0 (off) or a power of two from 2 to 64, got 1
// WIDE: lanes must be -1 (the target's), 0 (off) or a power of two from 2 to 64, got 65
// SIX: lanes must be -1 (the target's), 0 (off) or a power of two from 2 to 64, got 6
// WORD: error: invalid value 'eight' for option 'lanes'
// WORD-NOT: Traceback
func.func @f() {
  return
}
