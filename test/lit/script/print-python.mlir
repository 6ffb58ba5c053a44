// RUN: sparsecomp-opt %s --split-input-file --linalg-generalize-named-ops --print-python | FileCheck %s

// Stage I printed as Python in the kernel subset (sparsecomp.script.printer):
// a statement of index notation per linalg.generic, the reduction from the
// body's last op, the fill's zero implied by +=.
// CHECK: from sparsecomp.script import *
// CHECK: @kernel
// CHECK-NEXT: def spmv(a0: Tensor[f32, ("a0_0", "a0_1"), "#sparse_iter.layout<{{.*}}>"], a1: Tensor[f32, ("a1_0",)]):
// CHECK-NEXT:     t1[i] += a0[i, j] * a1[j]
// CHECK-NEXT:     return t1
// CHECK: MODULE = assemble(spmv)
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @spmv(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// An elementwise statement into a declared sparse result, a max reduction,
// a select and a math function; a private callee and a module attribute.
// CHECK: @kernel(private=True)
// CHECK-NEXT: def relu(a0: Tensor[f64, ("a0_0", "a0_1"), "#sparse_iter.layout<{{.*}}>"]):
// CHECK-NEXT:     t1: Tensor[f64, ("t1_0", "t1_1"), "#sparse_iter.layout<{{.*}}>"]
// CHECK-NEXT:     t1[i, j] = where(a0[i, j] > 0.0, a0[i, j], exp(a0[i, j]) - 1.0)
// CHECK-NEXT:     return t1
// CHECK: @kernel
// CHECK-NEXT: def rows(a0: Tensor[f64, ("a0_0", "a0_1"), "#sparse_iter.layout<{{.*}}>"]):
// CHECK-NEXT:     t1 = relu(a0)
// CHECK-NEXT:     t2[i] = max(t2[i], t1[i, j])
// CHECK-NEXT:     return t2
// CHECK: MODULE = assemble(relu, rows, attributes={"sparse_iter.note": "\"x\""})
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
module attributes {sparse_iter.note = "x"} {
  func.func private @relu(%A: tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
    %n = tensor.dim %A, %c1 : tensor<?x?xf64, #csr>
    %e = tensor.empty(%m, %n) : tensor<?x?xf64, #csr>
    %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%A : tensor<?x?xf64, #csr>) outs(%e : tensor<?x?xf64, #csr>) {
    ^bb0(%a: f64, %o: f64):
      %zero = arith.constant 0.0 : f64
      %one = arith.constant 1.0 : f64
      %pos = arith.cmpf ogt, %a, %zero : f64
      %x = math.exp %a : f64
      %xm = arith.subf %x, %one : f64
      %s = arith.select %pos, %a, %xm : f64
      linalg.yield %s : f64
    } -> tensor<?x?xf64, #csr>
    return %r : tensor<?x?xf64, #csr>
  }
  func.func @rows(%A: tensor<?x?xf64, #csr>) -> tensor<?xf64> {
    %c0 = arith.constant 0 : index
    %ninf = arith.constant 0xFFF0000000000000 : f64
    %R = call @relu(%A) : (tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr>
    %m = tensor.dim %R, %c0 : tensor<?x?xf64, #csr>
    %e = tensor.empty(%m) : tensor<?xf64>
    %f = linalg.fill ins(%ninf : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
    %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
        ins(%R : tensor<?x?xf64, #csr>) outs(%f : tensor<?xf64>) {
    ^bb0(%a: f64, %o: f64):
      %mx = arith.maximumf %o, %a : f64
      linalg.yield %mx : f64
    } -> tensor<?xf64>
    return %r : tensor<?xf64>
  }
}
