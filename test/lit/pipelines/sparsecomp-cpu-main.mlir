// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu)' \
// RUN:   | %mlir-runner -e main -entry-point-result=void %runner-libs \
// RUN:   | FileCheck %s

// A program written the way MLIR's own sparse tests are: main() builds its
// sparse operands with sparse_tensor.convert, calls kernels and prints with
// vector.print and printMemrefF64. Every function goes to the upstream
// sparsifier (main uses sparse_tensor ops; callees follow) inside the
// sparsecomp-cpu pipeline, so the output runs in mlir-runner as is.
// The same BSR value feeds two calls, which must not disturb each other.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense) }>
#abt = {
  indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
  iterator_types = ["parallel", "parallel", "reduction"]
}
#rowsum = {
  indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
  iterator_types = ["parallel", "reduction"]
}

func.func private @printMemrefF64(%m: tensor<*xf64>)

func.func @abt(%a: tensor<4x6xf64, #CSR>, %b: tensor<4x6xf64, #BSR>) -> tensor<4x4xf64> {
  %z = arith.constant dense<0.0> : tensor<4x4xf64>
  %0 = linalg.generic #abt ins(%a, %b : tensor<4x6xf64, #CSR>, tensor<4x6xf64, #BSR>) outs(%z : tensor<4x4xf64>) {
  ^bb0(%x: f64, %y: f64, %o: f64):
    %m = arith.mulf %x, %y : f64
    %s = arith.addf %m, %o : f64
    linalg.yield %s : f64
  } -> tensor<4x4xf64>
  return %0 : tensor<4x4xf64>
}

func.func @rowsum(%b: tensor<4x6xf64, #BSR>) -> tensor<4xf64> {
  %z = arith.constant dense<0.0> : tensor<4xf64>
  %0 = linalg.generic #rowsum ins(%b : tensor<4x6xf64, #BSR>) outs(%z : tensor<4xf64>) {
  ^bb0(%x: f64, %o: f64):
    %s = arith.addf %x, %o : f64
    linalg.yield %s : f64
  } -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %d = arith.constant dense<[[1.0, 2.0, 0.0, 0.0, 3.0, 4.0],
                             [5.0, 6.0, 0.0, 0.0, 7.0, 8.0],
                             [0.0, 0.0, 9.0, 1.0, 0.0, 0.0],
                             [0.0, 0.0, 2.0, 3.0, 0.0, 0.0]]> : tensor<4x6xf64>
  %a = sparse_tensor.convert %d : tensor<4x6xf64> to tensor<4x6xf64, #CSR>
  %b = sparse_tensor.convert %d : tensor<4x6xf64> to tensor<4x6xf64, #BSR>
  // Row sums: 10, 26, 10, 5.
  // CHECK: data =
  // CHECK-NEXT: [10,  26,  10,  5]
  %s = call @rowsum(%b) : (tensor<4x6xf64, #BSR>) -> tensor<4xf64>
  %u = tensor.cast %s : tensor<4xf64> to tensor<*xf64>
  call @printMemrefF64(%u) : (tensor<*xf64>) -> ()
  // d * d^T.
  // CHECK: ( ( 30, 70, 0, 0 ), ( 70, 174, 0, 0 ), ( 0, 0, 82, 21 ), ( 0, 0, 21, 13 ) )
  %r = call @abt(%a, %b) : (tensor<4x6xf64, #CSR>, tensor<4x6xf64, #BSR>) -> tensor<4x4xf64>
  %f = arith.constant -1.0 : f64
  %v = vector.transfer_read %r[%c0, %c0], %f : tensor<4x4xf64>, vector<4x4xf64>
  vector.print %v : vector<4x4xf64>
  // CHECK: nnz = 12
  %n = sparse_tensor.number_of_entries %a : tensor<4x6xf64, #CSR>
  vector.print str "nnz = "
  vector.print %n : index
  bufferization.dealloc_tensor %a : tensor<4x6xf64, #CSR>
  bufferization.dealloc_tensor %b : tensor<4x6xf64, #BSR>
  return
}
