// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-huge-pages
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-huge-pages='min-bytes=0' 2>&1 | FileCheck %s --check-prefix=OPTION

// OPTION: min-bytes must be > 0 and < 2^63, got 0
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-huge-pages='min-bytes=99999999999999999999' 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: invalid value '99999999999999999999' for option 'min-bytes': expected a 64-bit integer
// HUGE-NOT: Traceback

// A function of the module's own is in the way of libc's madvise.
// expected-error@+1 {{sparse-iter-huge-pages: the module defines '@madvise' as something other than libc's madvise (index, index, i32) -> i32; rename it}}
func.func private @madvise(i64) -> ()
func.func @result(%m: index) -> memref<?xf32> {
  %buf = memref.alloc(%m) : memref<?xf32>
  return %buf : memref<?xf32>
}
