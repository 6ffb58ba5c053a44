// RUN: sparsecomp-opt %s --pass-pipeline='builtin.module(sparsecomp-cpu-layouts,sparsecomp-cpu-loops,canonicalize,cse)' --print-python | FileCheck %s

// Stage II printed as Python in the loop subset (sparsecomp.script.loops_printer):
// scf.for as a range loop whose carried values are variables bound before it
// and again in its body, tensor reads as subscripts, tensor.insert as a
// subscript assignment, operands used once written inline, the rest as op(...).
// CHECK: @loops(fastmath="reassoc,contract", attrs={"sparse_iter.same_sizes": "[array<i64: 0, 1, 1, 0>]"})
// CHECK-NEXT: def spmv(arg0: "tensor<?x?xf32, #sparse_iter.layout<{{.*}}>>", arg1: "tensor<?xf32>") -> "tensor<?xf32>":
// CHECK:     c0 = index(0)
// CHECK:     cst = f32(0.0)
// CHECK:     [[M:[a-z_0-9]+]] = dim(arg0, c0)
// CHECK:     [[POS:[a-z_0-9]+]] = op("sparse_iter.positions", arg0, types=["tensor<?xi32>"], attrs={"level": "1 : i64"})
// CHECK:     [[OUT:arg[0-9]+]] = [[EMPTY:v[0-9]+]]
// CHECK-NEXT:     for [[I:arg[0-9]+]] in range(c0, [[M]], attrs={"sparse_iter.parallel": "unit"}):
// CHECK-NEXT:         [[LO:[a-z_0-9]+]] = uindex([[POS]]{{\[}}[[I]]{{\]}})
// CHECK-NEXT:         [[HI:[a-z_0-9]+]] = uindex([[POS]]{{\[}}[[I]] + c1{{\]}})
// CHECK-NEXT:         [[ACC:arg[0-9]+]] = cst
// CHECK-NEXT:         for [[P:arg[0-9]+]] in range([[LO]], [[HI]]):
// CHECK:             [[ACC]] = [[ACC]] + {{.*}} * arg1[{{.*}}]
// CHECK-NEXT:         [[OUT]]{{\[}}[[I]]{{\]}} = [[ACC]]
// CHECK-NEXT:     return [[OUT]]
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
