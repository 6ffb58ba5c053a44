// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics

// Rules of #sparse_iter.cpu / #sparse_iter.cuda (sparsecomp.targets) and of
// the sparse_iter.targets / sparse_iter.target attributes.

// expected-error@+1 {{unknown CPU architecture 'riscv64'; expected ['x86_64', 'aarch64']}}
module @negative_arch attributes {sparse_iter.targets = {host = #sparse_iter.cpu<riscv64, features = [], vector_bits = 128, threads = 0>}} {}

// -----

// expected-error@+1 {{unknown x86_64 feature(s) neon; known: sse4.2, avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512dq}}
module @negative_feature attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx2, neon], vector_bits = 256, threads = 0>}} {}

// -----

// expected-error@+2 {{expected valid keyword}}
// expected-error@+1 {{failed to parse SparseIter_CpuTargetAttr parameter 'features'}}
module @negative_feature_type attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [1], vector_bits = 128, threads = 0>}} {}

// -----

// expected-error@+1 {{vector_bits must be 0 (scalar code), 128, 256 or 512, got 64}}
module @negative_vector_bits attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 64, threads = 0>}} {}

// -----

// expected-error@+1 {{vector_bits 512 needs a feature that provides it; avx2, fma give at most 256}}
module @negative_vector_feature attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 512, threads = 0>}} {}

// -----

// expected-error@+1 {{threads must be >= 0 (0: all cores), got -2}}
module @negative_threads attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = -2>}} {}

// -----

// expected-error@+1 {{unknown tune 'zen'; known: intel, amd}}
module @negative_tune attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0, tune = zen>}} {}

// -----

// expected-error@+1 {{unknown sm version 91; expected one of (70, 75, 80, 86, 87, 89, 90)}}
module @negative_sm attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_91, mma_shapes = [], sparse_mma_shapes = []>}} {}

// -----

// expected-error@+1 {{unknown MMA shape 'm8n8k8'; expected one of m8n8k4, m16n8k8, m16n8k16, m16n8k32}}
module @negative_mma_shape attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m8n8k8], sparse_mma_shapes = []>}} {}

// -----

// expected-error@+1 {{sparse MMA shape m16n8k32 needs sm_80, not sm_75}}
module @negative_sparse_mma_sm attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_75, mma_shapes = [], sparse_mma_shapes = [m16n8k32]>}} {}

// -----

// expected-error@+2 {{expected valid keyword}}
// expected-error@+1 {{failed to parse SparseIter_CudaTargetAttr parameter 'mma_shapes'}}
module @negative_mma_type attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_80, mma_shapes = [16], sparse_mma_shapes = []>}} {}

// -----

// expected-error@+2 {{expected a compute capability such as sm_90}}
// expected-error@+1 {{failed to parse SparseIter_CudaTargetAttr parameter 'sm'}}
module @negative_sm_spelling attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<90, mma_shapes = [], sparse_mma_shapes = []>}} {}

// -----

// expected-error@+1 {{struct is missing required parameter: threads}}
module @negative_missing_field attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128>}} {}

// -----

// expected-error@+1 {{'sparse_iter.targets' must be a dictionary of named targets, got ["host"]}}
module @negative_targets_kind attributes {sparse_iter.targets = ["host"]} {}

// -----

// expected-error@+1 {{target 'host' must be #sparse_iter.cpu or #sparse_iter.cuda}}
module @negative_target_entry attributes {sparse_iter.targets = {host = "x86_64"}} {}

// -----

module @negative_target_name attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0>}} {
  // expected-error@+1 {{unknown target 'gpu'; the module's sparse_iter.targets has: host}}
  func.func private @f() attributes {sparse_iter.target = "gpu"}
}

// -----

// expected-error@+1 {{'sparse_iter.target' must name a target as a string, got 3 : i64}}
func.func private @negative_target_type() attributes {sparse_iter.target = 3}

// -----

// expected-error@+2 {{expected valid keyword}}
// expected-error@+1 {{failed to parse SparseIter_CpuTargetAttr parameter 'tune'}}
module @negative_tune_kind attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0, tune = 3>}} {}
