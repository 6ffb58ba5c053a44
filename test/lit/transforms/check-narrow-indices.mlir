// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-check-narrow-indices | FileCheck %s --enable-var-scope

// A conversion to 8-bit positions and 16-bit coordinates that the function
// reads: after it, the entries of its compressed level (its coordinates
// buffer's size) must be at most 255 and its level size at most 65536, or the
// program reports the number and exits.
#CSR8 = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), posWidth = 8, crdWidth = 16 }>

// CHECK-DAG: llvm.func @dprintf(i32, !llvm.ptr, ...) -> i32
// CHECK-DAG: llvm.func @exit(i32)
// CHECK-DAG: llvm.mlir.global private constant @[[$MSG0:[a-z_0-9]+]]("{{.*}}check-narrow-indices.mlir:[[@LINE+18]]:8: error: 'convert' builds tensor<?x?xf64, {{.*}}> with %lld entries at level 1, more than its 8-bit positions address (at most 255); declare a wider posWidth\0A\00")
// CHECK-DAG: llvm.mlir.global private constant @{{[a-z_0-9]+}}("{{.*}}: error: 'convert' builds {{.*}} with level 1 of size %lld, more than its 16-bit coordinates address (at most 65536); declare a wider crdWidth\0A\00")
// CHECK-LABEL: func.func @convert
// CHECK-SAME: (%[[D:.*]]: tensor<?x?xf64>)
// CHECK: %[[A:.*]] = sparse_tensor.convert %[[D]]
// CHECK-NEXT: %[[CRD:.*]] = sparse_tensor.coordinates %[[A]] {level = 1 : index}
// CHECK: %[[N:.*]] = memref.dim %[[CRD]], %{{.*}} : memref<?xi16>
// CHECK: %[[SIZE:.*]] = sparse_tensor.lvl %[[A]], %{{.*}}
// CHECK: %[[C255:.*]] = arith.constant 255 : index
// CHECK: %[[BAD:.*]] = arith.cmpi ugt, %[[N]], %[[C255]] : index
// CHECK: %[[C65536:.*]] = arith.constant 65536 : index
// CHECK: %[[BAD2:.*]] = arith.cmpi ugt, %[[SIZE]], %[[C65536]] : index
// CHECK: scf.if %[[BAD]] {
// CHECK-NEXT: func.call @{{.*}}(%[[N]]) : (index) -> ()
// CHECK: scf.if %[[BAD2]] {
// CHECK-NEXT: func.call @{{.*}}(%[[SIZE]]) : (index) -> ()
// CHECK: sparse_tensor.number_of_entries %[[A]]
func.func @convert(%d: tensor<?x?xf64>) -> index {
  %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #CSR8>
  %n = sparse_tensor.number_of_entries %a : tensor<?x?xf64, #CSR8>
  return %n : index
}

// -----

// A linalg op with a COO result of 16-bit positions (its compressed level)
// and default (64-bit) coordinates, in a private function (its callers read
// the result): only the positions are checked.
#COO16 = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton(soa)), posWidth = 16 }>
#trait = {
  indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
  iterator_types = ["parallel", "parallel"]
}

// CHECK-LABEL: func.func private @negate
// CHECK: %[[R:.*]] = linalg.generic
// CHECK: sparse_tensor.coordinates %[[R]] {level = 0 : index}
// CHECK: arith.constant 65535 : index
// CHECK-NOT: sparse_tensor.lvl
// CHECK: scf.if
// CHECK-NOT: scf.if
// CHECK: return %[[R]]
func.func private @negate(%a: tensor<8x8xf32, #COO16>) -> tensor<8x8xf32, #COO16> {
  %e = tensor.empty() : tensor<8x8xf32, #COO16>
  %r = linalg.generic #trait ins(%a : tensor<8x8xf32, #COO16>) outs(%e : tensor<8x8xf32, #COO16>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<8x8xf32, #COO16>
  return %r : tensor<8x8xf32, #COO16>
}

// -----

// Default widths, arguments and results of other ops are left alone.
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
#CSR8 = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), posWidth = 8 }>

// CHECK-LABEL: func.func @untouched
// CHECK-NOT: sparse_tensor.coordinates
// CHECK-NOT: scf.if
// CHECK: return
func.func @untouched(%d: tensor<?x?xf64>, %b: tensor<?x?xf64, #CSR8>) -> (tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR8>) {
  %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #CSR>
  %c = tensor.cast %b : tensor<?x?xf64, #CSR8> to tensor<?x?xf64, #CSR8>
  return %a, %c : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR8>
}

// -----

// A public function that only returns its result leaves it to its callers: a
// Python caller's runtime checks it (and raises, where an exit would end the
// caller's process); a call in the program is checked where it returns.
#CSR8 = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), posWidth = 8 }>

// CHECK-LABEL: func.func @returned
// CHECK-NOT: sparse_tensor.coordinates
// CHECK: return
func.func @returned(%d: tensor<?x?xf64>) -> tensor<?x?xf64, #CSR8> {
  %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #CSR8>
  return %a : tensor<?x?xf64, #CSR8>
}

// CHECK-LABEL: func.func @caller
// CHECK: %[[R:.*]] = call @returned
// CHECK-NEXT: sparse_tensor.coordinates %[[R]] {level = 1 : index}
// CHECK: scf.if
func.func @caller(%d: tensor<?x?xf64>) -> index {
  %r = call @returned(%d) : (tensor<?x?xf64>) -> tensor<?x?xf64, #CSR8>
  %n = sparse_tensor.number_of_entries %r : tensor<?x?xf64, #CSR8>
  return %n : index
}

// -----

// A dense tensor converted to 8-bit positions whose last level holds every
// entry: its nonzeros are counted before the conversion (whose inserts read
// the positions they would wrap), and checked after it as well.
#CSR8 = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), posWidth = 8 }>

// CHECK-LABEL: func.func @counted
// CHECK-SAME: (%[[D:.*]]: tensor<?x?xf32>)
// CHECK: %[[N:.*]] = scf.for
// CHECK: scf.for
// CHECK: tensor.extract %[[D]]
// CHECK: arith.cmpf une
// CHECK: %[[BAD:.*]] = arith.cmpi ugt, %[[N]], %{{.*}} : index
// CHECK: scf.if %[[BAD]] {
// CHECK-NEXT: func.call @{{.*}}(%[[N]]) : (index) -> ()
// CHECK: %[[A:.*]] = sparse_tensor.convert %[[D]]
// CHECK-NEXT: sparse_tensor.coordinates %[[A]] {level = 1 : index}
func.func @counted(%d: tensor<?x?xf32>) -> index {
  %a = sparse_tensor.convert %d : tensor<?x?xf32> to tensor<?x?xf32, #CSR8>
  %n = sparse_tensor.number_of_entries %a : tensor<?x?xf32, #CSR8>
  return %n : index
}

// -----

// Blocks (dense levels below the positions): not every entry is counted by
// the positions, so only the check after the conversion is made.
#BSR8 = #sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, i mod 2 : dense, j mod 2 : dense), posWidth = 8 }>

// CHECK-LABEL: func.func @blocks
// CHECK-NOT: scf.for
// CHECK: sparse_tensor.convert
// CHECK-NEXT: sparse_tensor.coordinates
func.func @blocks(%d: tensor<8x8xf32>) -> index {
  %a = sparse_tensor.convert %d : tensor<8x8xf32> to tensor<8x8xf32, #BSR8>
  %n = sparse_tensor.number_of_entries %a : tensor<8x8xf32, #BSR8>
  return %n : index
}
