// RUN: not sparsecomp-opt %s --sparse-iter-gpu-map-loops='rows-per-block=2048' 2>&1 | FileCheck %s --check-prefix=THREADS
// RUN: not sparsecomp-opt %s --sparse-iter-gpu-map-loops='column-lanes=0' 2>&1 | FileCheck %s --check-prefix=ZERO

// Block sizes the hardware cannot launch are refused up front.
// THREADS: a block has at most 1024 threads, got 2048
// ZERO: block sizes must be > 0, got 128, 0, 4
func.func @rows(%y: memref<?xf32>, %m: index) {
  return
}
