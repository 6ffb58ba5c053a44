// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-mark-upstream | FileCheck %s --enable-var-scope

// A CSR matrix times a COO matrix: sparse_iter's lowering does not co-iterate
// these structures (make_plan refuses), so the function goes to the upstream
// sparsifier with #sparse_tensor types; COO's singleton level is stored SoA,
// as sparse_iter stores it. A function it can lower stays as it is.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#coo = #sparse_iter.layout<{map = (i, j) -> (i : compressed(nonunique), j : singleton), posWidth = 32, crdWidth = 32}>
#id = affine_map<(i, j) -> (i, j)>

// CHECK-DAG: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG: #[[$COO:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @mul
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #[[$CSR]]>, %[[B:.*]]: tensor<?x?xf32, #[[$COO]]>, %[[O:.*]]: tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-SAME: sparse_iter.upstream = "has a linalg.generic at line [[@LINE+3]] that sparse_iter cannot lower:
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<?x?xf32, #[[$CSR]]>, tensor<?x?xf32, #[[$COO]]>) outs(%[[O]] : tensor<?x?xf32>)
func.func @mul(%a: tensor<?x?xf32, #csr>, %b: tensor<?x?xf32, #coo>, %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x?xf32, #csr>, tensor<?x?xf32, #coo>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.mulf %x, %y : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// CHECK-LABEL: func.func @negative_scale
// CHECK-SAME: tensor<?x?xf32, #sparse_iter.layout
// CHECK-NOT: sparse_iter.upstream
// CHECK: return
func.func @negative_scale(%a: tensor<?x?xf32, #csr>, %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf32, #csr>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%x: f32, %z: f32):
    %p = arith.mulf %x, %x : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// Callers and callees of a marked function are marked too, so calls keep
// matching types.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#coo = #sparse_iter.layout<{map = (i, j) -> (i : compressed(nonunique), j : singleton), posWidth = 32, crdWidth = 32}>
#id = affine_map<(i, j) -> (i, j)>

// CHECK-DAG: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG: #[[$COO:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, #[[$CSR]]>, %[[B:.*]]: tensor<?x?xf32, #[[$COO]]>, %[[O:.*]]: tensor<?x?xf32>) -> tensor<?x?xf32>
// CHECK-SAME: sparse_iter.upstream = "calls or is called by 'add', which has a linalg.generic at line
// CHECK: call @add(%[[A]], %[[B]], %[[O]]) : (tensor<?x?xf32, #[[$CSR]]>, tensor<?x?xf32, #[[$COO]]>, tensor<?x?xf32>) -> tensor<?x?xf32>
func.func @main(%a: tensor<?x?xf32, #csr>, %b: tensor<?x?xf32, #coo>, %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = func.call @add(%a, %b, %o) : (tensor<?x?xf32, #csr>, tensor<?x?xf32, #coo>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// CHECK-LABEL: func.func private @add
// CHECK-SAME: tensor<?x?xf32, #[[$CSR]]>, %{{.*}}: tensor<?x?xf32, #[[$COO]]>
// CHECK-SAME: sparse_iter.upstream = "has a linalg.generic
func.func private @add(%a: tensor<?x?xf32, #csr>, %b: tensor<?x?xf32, #coo>, %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x?xf32, #csr>, tensor<?x?xf32, #coo>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.addf %x, %y : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// CHECK-LABEL: func.func @negative_unrelated
// CHECK-NOT: sparse_iter.upstream
func.func @negative_unrelated(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}

// -----

// A function that is marked already (by sparse-iter-import-sparse-tensor, or
// by hand to ask for the upstream sparsifier) keeps its reason; its layouts
// become #sparse_tensor encodings.
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed)}>
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

// CHECK-DAG: #[[$CSC:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>
// CHECK-DAG: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
// CHECK-LABEL: func.func @print
// CHECK-SAME: tensor<?x?xf64, #[[$CSR]]>
// CHECK-SAME: sparse_iter.upstream = "uses 'sparse_tensor.print', which sparse_iter has no counterpart for"
// CHECK: sparse_tensor.print
func.func @print(%a: tensor<?x?xf64, #CSR>)
    attributes {sparse_iter.upstream = "uses 'sparse_tensor.print', which sparse_iter has no counterpart for"} {
  sparse_tensor.print %a : tensor<?x?xf64, #CSR>
  return
}

// CHECK-LABEL: func.func @requested
// CHECK-SAME: tensor<?x?xf64, #[[$CSC]]>
// CHECK-SAME: sparse_iter.upstream = "requested"
func.func @requested(%a: tensor<?x?xf64, #csc>) -> tensor<?x?xf64, #csc> attributes {sparse_iter.upstream = "requested"} {
  return %a : tensor<?x?xf64, #csc>
}

// -----

// A conversion to COO is not one sparse_iter lowers (CSR and CSC targets
// only): upstream converts it, as sparse_tensor.convert. CSR -> CSC stays.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>
#coo = #sparse_iter.layout<{map = (i, j) -> (i : compressed(nonunique), j : singleton), posWidth = 32, crdWidth = 32}>
// CHECK-LABEL: func.func @to_coo
// CHECK-SAME: sparse_iter.upstream = "has a conversion at line [[@LINE+3]] that sparse_iter cannot lower: conversions produce [dense, compressed] layouts (CSR, CSC) or dense tensors, not coo"
// CHECK: sparse_tensor.convert %{{.*}} : tensor<?x?xf32, #{{.*}}> to tensor<?x?xf32, #{{.*}}>
func.func @to_coo(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #coo> {
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #coo>
  return %r : tensor<?x?xf32, #coo>
}
// CHECK-LABEL: func.func @to_csc
// CHECK-NOT: sparse_iter.upstream
// CHECK: sparse_iter.set_encoding
func.func @to_csc(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc> {
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc>
  return %r : tensor<?x?xf32, #csc>
}

// -----

// ELL and ragged levels have no #sparse_tensor form: in a marked function they
// are compressed (CSR instead of ELL; the runtime converts at the call).
#ell = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed_fixed[4]), posWidth = 32, crdWidth = 32}>
#ragged = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : dense_varied), posWidth = 32, crdWidth = 32}>
#id = affine_map<(i, j) -> (i, j)>

// CHECK: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @ell_plus_dense
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #[[$CSR]]>, %{{.*}}: tensor<?x?xf32, #[[$CSR]]>, %{{.*}}: tensor<?x?xf32>)
// CHECK-SAME: sparse_iter.upstream
func.func @ell_plus_dense(%e: tensor<?x?xf32, #ell>, %r: tensor<?x?xf32, #ragged>, %d: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e, %r, %d : tensor<?x?xf32, #ell>, tensor<?x?xf32, #ragged>, tensor<?x?xf32>) outs(%d : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %o: f32):
    %p = arith.addf %x, %y : f32
    %q = arith.addf %p, %z : f32
    linalg.yield %q : f32
  } -> tensor<?x?xf32>
  return %s : tensor<?x?xf32>
}

// -----

// The upstream sparsifier stores blocks whole (a 3x3 BSR 2x2 matrix is 4x4 to
// it). Blocked types whose shape is dynamic or not a multiple of the block are
// held unblocked (BSR as CSR); static whole-block shapes stay blocked. Results
// held unblocked name their declared layout, which the runtime converts to.
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense), posWidth = 16, crdWidth = 8}>

// CHECK-DAG: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG: #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense), posWidth = 16, crdWidth = 8 }>
// CHECK-LABEL: func.func @partial
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32, #[[$CSR]]>, %{{.*}}: tensor<3x3xf32, #[[$CSR]]>, %{{.*}}: tensor<4x4xf32, #[[$BSR]]>) -> tensor<?x?xf32, #[[$CSR]]>
// CHECK-SAME: sparse_iter.declared_results = ["#sparse_iter.layout<{map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense), posWidth = 16, crdWidth = 8}>"]
func.func @partial(%a: tensor<?x?xf32, #bsr>, %b: tensor<3x3xf32, #bsr>, %c: tensor<4x4xf32, #bsr>) -> tensor<?x?xf32, #bsr> attributes {sparse_iter.upstream = "requested"} {
  return %a : tensor<?x?xf32, #bsr>
}

// -----

// Upstream's n:m levels are held as CSR whatever the shape: it inserts into
// them without the group's padding, and co-iterating one with another sparse
// operand, or reading it out of its order, gives wrong sums.
#nm = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32}>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#id = affine_map<(i, j) -> (i, j)>

// CHECK-DAG: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @build_nm
// CHECK-SAME: (%[[M:.*]]: tensor<4x8xf32>) -> tensor<4x8xf32, #[[$CSR]]>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32, #[[$CSR]]>
// CHECK: linalg.copy ins(%[[M]] : tensor<4x8xf32>) outs(%[[E]] : tensor<4x8xf32, #[[$CSR]]>)
func.func @build_nm(%m: tensor<4x8xf32>) -> tensor<4x8xf32, #nm> attributes {sparse_iter.upstream = "requested"} {
  %e = tensor.empty() : tensor<4x8xf32, #nm>
  %r = linalg.copy ins(%m : tensor<4x8xf32>) outs(%e : tensor<4x8xf32, #nm>) -> tensor<4x8xf32, #nm>
  return %r : tensor<4x8xf32, #nm>
}

// CHECK-LABEL: func.func @convert_nm
// CHECK: sparse_tensor.convert %{{.*}} : tensor<4x8xf32> to tensor<4x8xf32, #[[$CSR]]>
func.func @convert_nm(%m: tensor<4x8xf32>) -> tensor<4x8xf32, #nm> attributes {sparse_iter.upstream = "requested"} {
  %s = "sparse_iter.set_encoding"(%m) : (tensor<4x8xf32>) -> tensor<4x8xf32, #nm>
  return %s : tensor<4x8xf32, #nm>
}

// CHECK-LABEL: func.func @sub_nm
// CHECK-SAME: (%{{.*}}: tensor<4x8xf32, #[[$CSR]]>, %{{.*}}: tensor<4x8xf32, #[[$CSR]]>, %{{.*}}: tensor<4x8xf32>)
func.func @sub_nm(%a: tensor<4x8xf32, #csr>, %b: tensor<4x8xf32, #nm>, %o: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {sparse_iter.upstream = "requested"} {
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32, #csr>, tensor<4x8xf32, #nm>) outs(%o : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %d = arith.subf %x, %y : f32
    linalg.yield %d : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A sparse_tensor op on #sparse_iter types (a test-style main building its
// matrix with sparse_tensor.convert) goes upstream whole, as the same op on
// #sparse_tensor types does.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// CHECK: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @build
// CHECK-SAME: sparse_iter.upstream = "uses 'sparse_tensor.convert' at line [[@LINE+3]], which sparse_iter has no counterpart for"
// CHECK: sparse_tensor.convert %{{.*}} : tensor<2x3xf64> to tensor<2x3xf64, #[[$CSR]]>
func.func @build(%d: tensor<2x3xf64>) -> tensor<2x3xf64, #csr> {
  %s = sparse_tensor.convert %d : tensor<2x3xf64> to tensor<2x3xf64, #csr>
  return %s : tensor<2x3xf64, #csr>
}

// -----

// A sparse_tensor op on plain memrefs (sparse_tensor.sort, as MLIR's
// sparse_rewrite_sort tests use it): upstream too; it reached the LLVM stage
// unlowered ("ops with unknown memory side effects are not supported").
#id1 = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @sort
// CHECK-SAME: sparse_iter.upstream = "uses 'sparse_tensor.sort' at line [[@LINE+4]], which sparse_iter has no counterpart for"
func.func @sort(%x: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xi32>
  sparse_tensor.sort quick_sort %n, %x {perm_map = #id1, ny = 0 : index} : memref<?xi32>
  return
}

// -----

// A BSR tensor of dynamic shape whose storage the function reads keeps its
// blocks (CSR storage would not be what it declared); the tensor it is
// converted from must be whole blocks, which sparse-iter-check-whole-blocks
// checks at run time. One whose storage no function reads is held as CSR.
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense) }>
#BSR3 = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 3 : dense, j floordiv 3 : compressed, i mod 3 : dense, j mod 3 : dense) }>

// CHECK-DAG: #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 2 : compressed, d0 mod 2 : dense, d1 mod 2 : dense) }>
// CHECK-DAG: #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
// CHECK-LABEL: func.func @queried
// CHECK: sparse_tensor.convert %{{.*}} : tensor<?x?xf64> to tensor<?x?xf64, #[[$BSR]]>
// CHECK: sparse_tensor.print %{{.*}} : tensor<?x?xf64, #[[$BSR]]>
// CHECK: sparse_tensor.convert %{{.*}} : tensor<?x?xf64> to tensor<?x?xf64, #[[$CSR]]>
func.func @queried(%d: tensor<?x?xf64>) attributes {sparse_iter.upstream = "requested"} {
  %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #BSR>
  sparse_tensor.print %a : tensor<?x?xf64, #BSR>
  %b = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #BSR3>
  return
}
