// RUN: not sparsecomp-opt %s --sparse-iter-gpu-tensorize='warps=0' 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not sparsecomp-opt %s --sparse-iter-gpu-tensorize='tiles=17' 2>&1 | FileCheck %s --check-prefix=TILES

// Tilings the kernel cannot launch (no warp, more than 1024 threads) or that
// would need more accumulator registers than a thread has are refused.
// WARPS: warps must be in 1..32 and tiles in 1..16, got 0 and 4
// TILES: warps must be in 1..32 and tiles in 1..16, got 4 and 17
func.func @empty() {
  return
}
