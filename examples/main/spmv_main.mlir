// SpMV written the way MLIR's sparse integration tests are: upstream
// #sparse_tensor syntax, the output passed in (outs), and a main() that
// builds its operands with sparse_tensor.convert and prints the result.
//
//   sparsecomp-run examples/main/spmv_main.mlir       # prints ( 17, 20, 52 )
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>

func.func @spmv(%A: tensor<3x4xf64, #CSR>, %x: tensor<4xf64>, %y: tensor<3xf64>) -> tensor<3xf64> {
  %r = linalg.matvec ins(%A, %x : tensor<3x4xf64, #CSR>, tensor<4xf64>)
                     outs(%y : tensor<3xf64>) -> tensor<3xf64>
  return %r : tensor<3xf64>
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %f0 = arith.constant 0.0 : f64
  %dense = arith.constant dense<[[1.0, 0.0, 2.0, 0.0],
                                 [0.0, 0.0, 0.0, 0.0],
                                 [0.0, 3.0, 0.0, 4.0]]> : tensor<3x4xf64>
  %A = sparse_tensor.convert %dense : tensor<3x4xf64> to tensor<3x4xf64, #CSR>
  %x = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf64>
  %y = arith.constant dense<[10.0, 20.0, 30.0]> : tensor<3xf64>
  %r = call @spmv(%A, %x, %y) : (tensor<3x4xf64, #CSR>, tensor<4xf64>, tensor<3xf64>) -> tensor<3xf64>
  %v = vector.transfer_read %r[%c0], %f0 : tensor<3xf64>, vector<3xf64>
  vector.print %v : vector<3xf64>
  bufferization.dealloc_tensor %A : tensor<3x4xf64, #CSR>
  return
}
