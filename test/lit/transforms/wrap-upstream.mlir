// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-wrap-upstream | FileCheck %s --enable-var-scope

// A sparsified function (buffers + storage specifier per sparse tensor, as
// sparsification-and-bufferization leaves it) behind a wrapper with
// sparsecomp's ABI: buffers, then dimension sizes. CSC: level 0 is dim 1.
#CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>
#LVL = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
!spec = !sparse_tensor.storage_specifier<#LVL>

// CHECK-LABEL: func.func private @scale__sparsified
// CHECK-SAME: !sparse_tensor.storage_specifier
// CHECK-NOT: llvm.emit_c_interface
// CHECK-NOT: sparse_iter.tensor_signature
func.func @scale(%pos: memref<?xindex>, %crd: memref<?xindex>, %val: memref<?xf64>, %spec: !spec,
                 %x: memref<?xf64>) -> (memref<?xindex>, memref<?xindex>, memref<?xf64>, !spec)
    attributes {llvm.emit_c_interface,
                sparse_iter.tensor_signature = (tensor<?x?xf64, #CSC>, tensor<?xf64>) -> tensor<?x?xf64, #CSC>} {
  return %pos, %crd, %val, %spec : memref<?xindex>, memref<?xindex>, memref<?xf64>, !spec
}

// Calls follow the rename.
// CHECK-LABEL: func.func private @negative_caller
// CHECK: call @scale__sparsified(
func.func private @negative_caller(%pos: memref<?xindex>, %crd: memref<?xindex>, %val: memref<?xf64>, %spec: !spec,
                           %x: memref<?xf64>) -> memref<?xf64> {
  %r:4 = func.call @scale(%pos, %crd, %val, %spec, %x)
      : (memref<?xindex>, memref<?xindex>, memref<?xf64>, !spec, memref<?xf64>) -> (memref<?xindex>, memref<?xindex>, memref<?xf64>, !spec)
  return %r#2 : memref<?xf64>
}

// CHECK-LABEL: func.func @scale(
// CHECK-SAME: %[[POS:.*]]: memref<?xindex>, %[[CRD:.*]]: memref<?xindex>, %[[VAL:.*]]: memref<?xf64>, %[[D0:.*]]: index, %[[D1:.*]]: index, %[[X:.*]]: memref<?xf64>)
// CHECK-SAME: -> (memref<?xindex>, memref<?xindex>, memref<?xf64>, index, index)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK: %[[S0:.*]] = sparse_tensor.storage_specifier.init
// CHECK: %[[S1:.*]] = sparse_tensor.storage_specifier.set %[[S0]]  lvl_sz at 0 with %[[D1]]
// CHECK: %[[S2:.*]] = sparse_tensor.storage_specifier.set %[[S1]]  lvl_sz at 1 with %[[D0]]
// CHECK: %[[NP:.*]] = memref.dim %[[POS]]
// CHECK: %[[S3:.*]] = sparse_tensor.storage_specifier.set %[[S2]]  pos_mem_sz at 1 with %[[NP]]
// CHECK: %[[NC:.*]] = memref.dim %[[CRD]]
// CHECK: %[[S4:.*]] = sparse_tensor.storage_specifier.set %[[S3]]  crd_mem_sz at 1 with %[[NC]]
// CHECK: %[[NV:.*]] = memref.dim %[[VAL]]
// CHECK: %[[S5:.*]] = sparse_tensor.storage_specifier.set %[[S4]]  val_mem_sz with %[[NV]]
// CHECK: %[[R:.*]]:4 = call @scale__sparsified(%[[POS]], %[[CRD]], %[[VAL]], %[[S5]], %[[X]])
// CHECK: %[[UP:.*]] = sparse_tensor.storage_specifier.get %[[R]]#3  pos_mem_sz at 1
// CHECK: %[[RP:.*]] = memref.reinterpret_cast %[[R]]#0 to offset: [0], sizes: [%[[UP]]], strides: [1]
// CHECK: %[[UC:.*]] = sparse_tensor.storage_specifier.get %[[R]]#3  crd_mem_sz at 1
// CHECK: %[[RC:.*]] = memref.reinterpret_cast %[[R]]#1 to offset: [0], sizes: [%[[UC]]], strides: [1]
// CHECK: %[[UV:.*]] = sparse_tensor.storage_specifier.get %[[R]]#3  val_mem_sz
// CHECK: %[[RV:.*]] = memref.reinterpret_cast %[[R]]#2 to offset: [0], sizes: [%[[UV]]], strides: [1]
// CHECK: %[[L0:.*]] = sparse_tensor.storage_specifier.get %[[R]]#3  lvl_sz at 0
// CHECK: %[[L1:.*]] = sparse_tensor.storage_specifier.get %[[R]]#3  lvl_sz at 1
// CHECK: return %[[RP]], %[[RC]], %[[RV]], %[[L1]], %[[L0]]

// -----

// Blocks: level sizes are dimension sizes divided (rounded up) by the block,
// and dimension sizes come back from the block levels. A dynamic-shape BSR
// argument (kept blocked: the program reads its storage) must be whole blocks:
// if not, the wrapper reports its shape and exits (sparsecomp.ir.fatal).
#BSR = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, i mod 2 : dense, j mod 3 : dense) }>
#LVL = #sparse_tensor.encoding<{ map = (d0, d1, d2, d3) -> (d0 : dense, d1 : compressed, d2 : dense, d3 : dense) }>
!spec = !sparse_tensor.storage_specifier<#LVL>

// CHECK: llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32
// CHECK: llvm.func @exit(i32)
// CHECK: llvm.mlir.global private constant @{{[a-z_0-9]+}}("{{.*}}:{{[0-9]+}}:{{[0-9]+}}: error: 'bsr' holds tensor<?x?xf32, {{.*}}> in whole 2x3 blocks, {{.*}} its shape at run time, %lldx%lld, does not divide into them\0A\00")
// CHECK: func.func private @[[$FATAL:[a-z_0-9]+]](%{{.*}}: index, %{{.*}}: index)
// CHECK: llvm.call @dprintf({{.*}})
// CHECK: llvm.call @exit
// CHECK-LABEL: func.func @bsr(
// CHECK-SAME: %[[POS:.*]]: memref<?xi32>, %[[CRD:.*]]: memref<?xi32>, %[[VAL:.*]]: memref<?xf32>, %[[D0:.*]]: index, %[[D1:.*]]: index)
// CHECK: %[[M0:.*]] = arith.remui %[[D0]], %{{.*}} : index
// CHECK: %[[M1:.*]] = arith.remui %[[D1]], %{{.*}} : index
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: func.call @[[$FATAL]](%[[D0]], %[[D1]]) : (index, index) -> ()
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[B0:.*]] = arith.ceildivui %[[D0]], %[[C2]]
// CHECK: storage_specifier.set {{.*}} lvl_sz at 0 with %[[B0]]
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[B1:.*]] = arith.ceildivui %[[D1]], %[[C3]]
// CHECK: storage_specifier.set {{.*}} lvl_sz at 1 with %[[B1]]
// CHECK: storage_specifier.set {{.*}} lvl_sz at 2 with %[[C2]]
// CHECK: storage_specifier.set {{.*}} lvl_sz at 3 with %[[C3]]
// CHECK: %[[L0:.*]] = sparse_tensor.storage_specifier.get {{.*}} lvl_sz at 0
// CHECK: %[[R0:.*]] = arith.muli %[[L0]], %[[C2]]
// CHECK: %[[L1:.*]] = sparse_tensor.storage_specifier.get {{.*}} lvl_sz at 1
// CHECK: %[[R1:.*]] = arith.muli %[[L1]], %[[C3]]
// CHECK: return {{.*}}, %[[R0]], %[[R1]] : memref<?xi32>, memref<?xi32>, memref<?xf32>, index, index
func.func @bsr(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %spec: !spec)
    -> (memref<?xi32>, memref<?xi32>, memref<?xf32>, !spec)
    attributes {sparse_iter.tensor_signature = (tensor<?x?xf32, #BSR>) -> tensor<?x?xf32, #BSR>} {
  return %pos, %crd, %val, %spec : memref<?xi32>, memref<?xi32>, memref<?xf32>, !spec
}

// -----

// Functions without a specifier in their signature, private ones, and public
// ones without a tensor-level signature (not called from Python) are left alone.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
!spec = !sparse_tensor.storage_specifier<#CSR>

// CHECK-LABEL: func.func @negative_dense
// CHECK-SAME: (%{{.*}}: memref<?xf64>) -> memref<?xf64> attributes {llvm.emit_c_interface}
func.func @negative_dense(%x: memref<?xf64>) -> memref<?xf64> attributes {llvm.emit_c_interface} {
  return %x : memref<?xf64>
}

// CHECK-LABEL: func.func private @negative_private
// CHECK-SAME: !sparse_tensor.storage_specifier
func.func private @negative_private(%v: memref<?xf64>, %s: !spec) -> memref<?xf64> {
  return %v : memref<?xf64>
}
// CHECK-NOT: func.func @negative_private

// CHECK-LABEL: func.func @negative_no_signature
// CHECK-SAME: !sparse_tensor.storage_specifier
func.func @negative_no_signature(%v: memref<?xf64>, %s: !spec) {
  return
}
// CHECK-NOT: func.func @negative_no_signature

// -----

// COO coordinates interleaved in one buffer (AoS, kept because the function reads
// them) have no sparsecomp form: the function is left as it is, marked uncallable
// from Python (it was an error that stopped the whole program).
#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>

// CHECK-LABEL: func.func @aos
// CHECK-SAME: sparse_iter.uncallable = "'aos' has no sparsecomp ABI: COO coordinates stored as an array of structs (singleton without soa) cannot cross the sparsecomp ABI
// CHECK-NOT: sparse_iter.tensor_signature
// CHECK-NOT: func.func @aos__sparsified
func.func @aos(%p: memref<?xindex>, %c: memref<?xindex>, %v: memref<?xf64>, %s: !sparse_tensor.storage_specifier<#COO>)
    attributes {sparse_iter.tensor_signature = (tensor<?x?xf64, #COO>) -> ()} {
  return
}
