// RUN: not sparsecomp-opt %s --split-input-file --print-python 2>&1 | FileCheck %s

// IR that is not stage I as the kernel subset writes it: the printer names
// the op, its location and why.
// CHECK: print-python-invalid.mlir:[[@LINE+1]]:1: error: 'func.func' cannot be printed as Python: an argument of type memref<?xf32>
func.func @buffers(%a: memref<?xf32>) {
  return
}

// -----

// CHECK: print-python-invalid.mlir:[[@LINE+2]]:8: error: 'linalg.matvec' cannot be printed as Python: a named op: print after linalg-generalize-named-ops
func.func @named(%A: tensor<?x?xf32>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
