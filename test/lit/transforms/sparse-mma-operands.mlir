// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-sparse-mma-operands | FileCheck %s --enable-var-scope

#nv24 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])}>

// 2:4 in a concrete layout (as upstream syntax imports it), the first operand
// of an f16 x f16 -> f32 product on a GPU with sparse MMAs: it takes the
// mma.sp metadata layout, 32-bit words, in the signature and at its use.
// CHECK-LABEL: func.func @upstream_2_4
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<?x?xf16, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>>
// CHECK: linalg.matmul ins(%[[A]], %{{.*}} : tensor<?x?xf16, #sparse_iter.layout<{{.*}}nmMetadata = mma_sp_m16n8k16}>>, tensor<?x?xf16>)
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @upstream_2_4(%a: tensor<?x?xf16, #nv24>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #nv24>, tensor<?x?xf16>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
}

// -----

#nv24 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])}>
#idx = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = indices}>

// Left as they are: f32 values (no f16 sparse MMA), an argument read by
// something else too, metadata the program names.
// CHECK-LABEL: func.func @f32_values
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4])}>>
// CHECK-LABEL: func.func @other_use
// CHECK-SAME: tensor<?x?xf16, #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4])}>>
// CHECK-LABEL: func.func @named_metadata
// CHECK-SAME: nmMetadata = indices
// CHECK-NOT: mma_sp
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k16]>}} {
  func.func @f32_values(%a: tensor<?x?xf32, #nv24>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf32, #nv24>, tensor<?x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
  func.func @other_use(%a: tensor<?x?xf16, #nv24>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf16, #nv24>) {
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #nv24>, tensor<?x?xf16>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d, %a : tensor<?x?xf32>, tensor<?x?xf16, #nv24>
  }
  func.func @named_metadata(%a: tensor<?x?xf16, #idx>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #idx>, tensor<?x?xf16>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
}

// -----

#nv24 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])}>

// Targets without sparse MMAs (a CPU; a GPU that lists none) leave it too.
// CHECK-LABEL: func.func @on_a_cpu
// CHECK-NOT: mma_sp
// CHECK-LABEL: func.func @no_sparse_mma
// CHECK-NOT: mma_sp
module attributes {sparse_iter.targets = {cpu = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 2>, old = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k8], sparse_mma_shapes = []>}} {
  func.func @on_a_cpu(%a: tensor<?x?xf16, #nv24>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "cpu"} {
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #nv24>, tensor<?x?xf16>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
  func.func @no_sparse_mma(%a: tensor<?x?xf16, #nv24>, %b: tensor<?x?xf16>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "old"} {
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #nv24>, tensor<?x?xf16>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %d : tensor<?x?xf32>
  }
}

// -----

#nv24 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])}>

// A result sized from the matrix (tensor.dim reads only its shape) and an f16
// accumulator: both products still take the mma.sp layout.
// CHECK-LABEL: func.func @sized_f16
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<?x?xf16, #sparse_iter.layout<{{.*}}nmMetadata = mma_sp_m16n8k16}>>
// CHECK: tensor.dim %[[A]]
// CHECK: linalg.matmul ins(%[[A]], %{{.*}} : tensor<?x?xf16, #sparse_iter.layout<{{.*}}nmMetadata = mma_sp_m16n8k16}>>, tensor<?x?xf16>) outs(%{{.*}} : tensor<?x?xf16>)
module attributes {sparse_iter.targets = {gpu = #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32, m16n8k16]>}} {
  func.func @sized_f16(%a: tensor<?x?xf16, #nv24>, %b: tensor<?x?xf16>) -> tensor<?x?xf16> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %z = arith.constant 0.0 : f16
    %m = tensor.dim %a, %c0 : tensor<?x?xf16, #nv24>
    %n = tensor.dim %b, %c1 : tensor<?x?xf16>
    %e = tensor.empty(%m, %n) : tensor<?x?xf16>
    %c = linalg.fill ins(%z : f16) outs(%e : tensor<?x?xf16>) -> tensor<?x?xf16>
    %d = linalg.matmul ins(%a, %b : tensor<?x?xf16, #nv24>, tensor<?x?xf16>) outs(%c : tensor<?x?xf16>) -> tensor<?x?xf16>
    return %d : tensor<?x?xf16>
  }
}
