// Upstream MLIR sparsifier version of ../spmm.mlir (one kernel per matrix
// shape: ${M}, ${N} substituted; K stays dynamic; A arrives as its CSR buffers
// through sparse-assembler). %C only carries C's shape.

#CSR = #sparse_tensor.encoding<{
  map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32
}>

#spmm = {
  indexing_maps = [affine_map<(i, j, k) -> (i, k)>,  // A
                   affine_map<(i, j, k) -> (k, j)>,  // B
                   affine_map<(i, j, k) -> (i, j)>], // C
  iterator_types = ["parallel", "parallel", "reduction"]
}

func.func @spmm(%A: tensor<${M}x${N}xf32, #CSR>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> attributes { llvm.emit_c_interface } {
  %zero = arith.constant 0.0 : f32
  %c0 = linalg.fill ins(%zero : f32) outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.generic #spmm
      ins(%A, %B : tensor<${M}x${N}xf32, #CSR>, tensor<?x?xf32>) outs(%c0 : tensor<?x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
