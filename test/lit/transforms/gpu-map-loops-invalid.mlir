// RUN: not sparsecomp-opt %s --sparse-iter-gpu-map-loops='rows-per-block=2048' 2>&1 | FileCheck %s --check-prefix=THREADS
// RUN: not sparsecomp-opt %s --sparse-iter-gpu-map-loops='column-lanes=0' 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not sparsecomp-opt %s --sparse-iter-gpu-map-loops='reduction-lanes=3' 2>&1 | FileCheck %s --check-prefix=LANES
// RUN: not sparsecomp-opt %s --sparse-iter-gpu-map-loops='balance=diagonal' 2>&1 | FileCheck %s --check-prefix=BALANCE

// Block sizes the hardware cannot launch are refused up front.
// THREADS: a block has at most 1024 threads, got 2048
// ZERO: block sizes must be > 0, got 128, 0, 4
// LANES: reduction-lanes must be 0 (off) or a power of 2 up to 32, got 3
// BALANCE: balance must be 'rows' or 'nonzeros', got 'diagonal'
func.func @rows(%y: memref<?xf32>, %m: index) {
  return
}
