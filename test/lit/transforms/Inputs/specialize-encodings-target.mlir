// Input of specialize-encodings-invalid.mlir, run with target=tpu: the option
// names neither a module target nor "host".
// expected-error@+1 {{unknown target 'tpu': expected 'host' or a name from the module's sparse_iter.targets (gpu)}}
module @negative_unknown_target attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_80, mma_shapes = [], sparse_mma_shapes = []>}} {
  func.func private @f(tensor<?x?xf32, #sparse_iter.sparsity<unstructured, density = 0.1>>)
}
