// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='warps=0' 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='tiles=17' 2>&1 | FileCheck %s --check-prefix=TILES
// RUN: not sparsecomp-opt %s --split-input-file --sparse-iter-gpu-tensorize='row-tiles=5' 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-gpu-tensorize

// Tilings the kernel cannot launch (no warp, more than 1024 threads) or that
// would need more accumulator registers than a thread has are refused.
// WARPS: warps must be in 1..32 and tiles in 1..16, got 0 and 4
// TILES: warps must be in 1..32 and tiles in 1..16, got 4 and 17
// ROWS: row-tiles must be in 1..4, got 5
func.func @empty() {
  return
}

// -----

// A product the tensor cores could run but do not is a remark that says why
// (issue 41: these fell back silently); so is a 2:4 product that runs on the
// dense tensor cores where the sparse ones cannot take it.
#bsr4x12 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 12 : compressed, i mod 4 : dense, j mod 12 : dense), posWidth = 32, crdWidth = 32}>
#nm = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32}>
#nm_mma = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>
#nm3x10 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 10 : dense, j mod 10 : structured[3, 10]), posWidth = 32, crdWidth = 8}>
#bsr16 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 16 : dense, j floordiv 16 : compressed, i mod 16 : dense, j mod 16 : dense), posWidth = 32, crdWidth = 32}>
#mm = {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
       iterator_types = ["parallel", "parallel", "reduction"]}
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @small_blocks(%a: tensor<?x?xf32, #bsr4x12>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    // expected-remark @+1 {{this product takes the scalar schedule: 4x12 blocks are not multiples of the 16x8 MMA tile, nor do they pack into one (at most 8 columns, or a multiple of 8)}}
    %d = linalg.generic #mm ins(%a, %b : tensor<?x?xf32, #bsr4x12>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
  func.func @two_four_f32(%a: tensor<?x?xf32, #nm>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    // expected-remark @+1 {{this 2:4 product runs on the dense tensor cores, not the sparse ones: the sparse tensor cores take 2:4 in f16 (tf32 only 1:2), not f32}}
    %d = linalg.generic #mm ins(%a, %b : tensor<?x?xf32, #nm>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
  func.func @tf32_f16_result(%a: tensor<?x?xf32, #bsr16>, %b: tensor<?x?xf32>, %c: tensor<?x?xf16>) -> tensor<?x?xf16> {
    // expected-remark @+1 {{this product takes the scalar schedule: f32 products accumulate in f32 on the tensor cores, and the result is f16}}
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf32, #bsr16>, tensor<?x?xf32>) outs(%c : tensor<?x?xf16>) -> tensor<?x?xf16>
    return %d : tensor<?x?xf16>
  }
  func.func @converting_body(%a: tensor<?x?xf32, #bsr16>, %b: tensor<?x?xf32>, %c: tensor<?x?xf16>) -> tensor<?x?xf16> {
    // expected-remark @+1 {{this product takes the scalar schedule: its body is not out + a * b of its operands (each maybe widened): it has arith.truncf}}
    %d = linalg.generic #mm ins(%a, %b : tensor<?x?xf32, #bsr16>, tensor<?x?xf32>) outs(%c : tensor<?x?xf16>) {
    ^bb0(%x: f32, %y: f32, %o: f16):
      %xt = arith.truncf %x : f32 to f16
      %yt = arith.truncf %y : f32 to f16
      %p = arith.mulf %xt, %yt : f16
      %s = arith.addf %o, %p : f16
      linalg.yield %s : f16
    } -> tensor<?x?xf16>
    return %d : tensor<?x?xf16>
  }
  func.func @two_four_f64_result(%a: tensor<?x?xf16, #nm_mma>, %b: tensor<?x?xf16>, %c: tensor<?x?xf64>) -> tensor<?x?xf64> {
    // expected-remark @+1 {{this product takes the scalar schedule: the tensor cores accumulate in f32 or f16, and the result is f64}}
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #nm_mma>, tensor<?x?xf16>) outs(%c : tensor<?x?xf64>) -> tensor<?x?xf64>
    return %d : tensor<?x?xf64>
  }
  func.func @plain_metadata(%a: tensor<?x?xf16, #nm>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    // expected-remark @+1 {{this 2:4 product runs on the dense tensor cores, not the sparse ones: A's 2:4 metadata is 'indices', not the mma_sp_m16n8k16 words the sparse tensor cores read}}
    %d = linalg.generic #mm ins(%a, %b : tensor<?x?xf16, #nm>, tensor<?x?xf16>) outs(%c : tensor<?x?xf32>) {
    ^bb0(%x: f16, %y: f16, %o: f32):
      %xe = arith.extf %x : f16 to f32
      %ye = arith.extf %y : f16 to f32
      %p = arith.mulf %xe, %ye : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
  func.func @groups_wider_than_k(%a: tensor<?x?xf32, #nm3x10>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    // expected-remark @+1 {{this product takes the scalar schedule: the sparse tensor cores take 2:4, and 3:10 groups do not tile the 8-wide k of an MMA}}
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf32, #nm3x10>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
  func.func @bf16_blocks(%a: tensor<?x?xbf16, #bsr16>, %b: tensor<?x?xbf16>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    // expected-remark @+1 {{this product takes the scalar schedule: no tensor-core MMA takes bf16 values (f16, or f32 as tf32)}}
    %d = linalg.generic #mm ins(%a, %b : tensor<?x?xbf16, #bsr16>, tensor<?x?xbf16>) outs(%c : tensor<?x?xf32>) {
    ^bb0(%x: bf16, %y: bf16, %o: f32):
      %xe = arith.extf %x : bf16 to f32
      %ye = arith.extf %y : bf16 to f32
      %p = arith.mulf %xe, %ye : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
}

// -----

// A function without a target in a module of several, fed to the pass on its own
// (stage I's passes give it its callers'): a located error, not an internal one.
// expected-error@+1 {{sparse-iter-gpu-tensorize: no sparse_iter.target on this function and the module has several targets (cpu, gpu)}}
module attributes {sparse_iter.targets = {
    cpu = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 2>,
    gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func private @helper(%a: tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
}
