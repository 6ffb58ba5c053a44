// Upstream MLIR sparsifier version of ../sddmm.mlir (one kernel per matrix
// shape: ${M}, ${N} substituted; K stays dynamic). The result is a new sparse
// tensor built by insertion (tensor.empty output). benchmarks/peers/upstream.py
// runs sparse-assembler{direct-out=true} first: S arrives as its three CSR
// buffers (sparse_tensor.assemble), and the result's buffers (positions,
// coordinates, values; malloc'ed by the kernel) are returned as they are.
//
// Y is N x K, indexed (j, k), so the loop order is i, j (S's levels), k and
// every output entry is inserted once, in order. With Y as K x N, indexed
// (k, j), the order becomes i, k, j, the sparsifier uses access-pattern
// expansion (an i1 "filled" buffer) for the sparse output, and this MLIR build
// aborts in memref-to-llvm (Assertion `integralElementType.getWidth() >= 8',
// MemRefToLLVM.cpp:1105). SpGEMM (spgemm.mlir) needs that expansion: the
// harness widens its i1 buffers first (upstream.WIDEN).

#CSR = #sparse_tensor.encoding<{
  map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32
}>

#sddmm = {
  indexing_maps = [affine_map<(i, j, k) -> (i, j)>,  // S
                   affine_map<(i, j, k) -> (i, k)>,  // X
                   affine_map<(i, j, k) -> (j, k)>,  // Y
                   affine_map<(i, j, k) -> (i, j)>], // out
  iterator_types = ["parallel", "parallel", "reduction"]
}

func.func @sddmm(%S: tensor<${M}x${N}xf32, #CSR>, %X: tensor<?x?xf32>, %Y: tensor<?x?xf32>)
    -> tensor<${M}x${N}xf32, #CSR> attributes { llvm.emit_c_interface } {
  %empty = tensor.empty() : tensor<${M}x${N}xf32, #CSR>
  %out = linalg.generic #sddmm
      ins(%S, %X, %Y : tensor<${M}x${N}xf32, #CSR>, tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%empty : tensor<${M}x${N}xf32, #CSR>) {
    ^bb0(%s: f32, %x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %q = arith.mulf %s, %p : f32
      %r = arith.addf %acc, %q : f32
      linalg.yield %r : f32
  } -> tensor<${M}x${N}xf32, #CSR>
  return %out : tensor<${M}x${N}xf32, #CSR>
}
