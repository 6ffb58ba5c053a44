// Upstream MLIR sparsifier version of ../spmv.mlir. benchmarks/peers/upstream.py
// substitutes ${M} and ${N} (one kernel per matrix shape: sparse_tensor.assemble
// needs a static shape) and runs sparse-assembler{direct-out=true} first, so A
// arrives as its three CSR buffers. %y only carries y's size: the kernel fills
// a fresh buffer with zeros (the result, malloc'ed by the kernel).

#CSR = #sparse_tensor.encoding<{
  map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32
}>

#spmv = {
  indexing_maps = [affine_map<(i, j) -> (i, j)>,  // A
                   affine_map<(i, j) -> (j)>,     // x
                   affine_map<(i, j) -> (i)>],    // y
  iterator_types = ["parallel", "reduction"]
}

func.func @spmv(%A: tensor<${M}x${N}xf32, #CSR>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> attributes { llvm.emit_c_interface } {
  %zero = arith.constant 0.0 : f32
  %y0 = linalg.fill ins(%zero : f32) outs(%y : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic #spmv
      ins(%A, %x : tensor<${M}x${N}xf32, #CSR>, tensor<?xf32>) outs(%y0 : tensor<?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
