// RUN: not sparsecomp-opt %s --split-input-file --print-python 2>&1 | FileCheck %s

// What neither the kernel subset nor the loop subset can say: the printer
// names the op, its location and why.
// CHECK: print-python-invalid.mlir:[[@LINE+1]]:1: error: 'func.func' cannot be printed as Python: a function of several blocks
func.func @branches(%c: i1, %a: f32, %b: f32) -> f32 {
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  return %a : f32
^bb2:
  return %b : f32
}

// -----

// CHECK: print-python-invalid.mlir:[[@LINE+1]]:1: error: 'llvm.func' cannot be printed as Python: a module-level op whose region is not empty
llvm.func @lowered(%a: f32) -> f32 {
  llvm.return %a : f32
}
