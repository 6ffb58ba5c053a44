// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics

// The stage II access ops read buffers of tensors with a single layout.

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @positions_of_plain(%t: tensor<?x?xf32>) -> tensor<?xi32> {
  // expected-error@+1 {{sparse_iter.positions needs a tensor with a single #sparse_iter.layout, got tensor<?x?xf32>}}
  %p = "sparse_iter.positions"(%t) {level = 1 : i64} : (tensor<?x?xf32>) -> tensor<?xi32>
  return %p : tensor<?xi32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @level_out_of_range(%A: tensor<?x?xf32, #csr>) -> tensor<?xi32> {
  // expected-error@+1 {{sparse_iter.coordinates level 2 is out of range for a layout of 2 levels}}
  %c = "sparse_iter.coordinates"(%A) {level = 2 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  return %c : tensor<?xi32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @dense_level_positions(%A: tensor<?x?xf32, #csr>) -> tensor<?xi32> {
  // expected-error@+1 {{level 0 (dense) stores no positions}}
  %p = "sparse_iter.positions"(%A) {level = 0 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  return %p : tensor<?xi32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @dense_level_coordinates(%A: tensor<?x?xf32, #csr>) -> tensor<?xi32> {
  // expected-error@+1 {{level 0 (dense) stores no coordinates}}
  %c = "sparse_iter.coordinates"(%A) {level = 0 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi32>
  return %c : tensor<?xi32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @wrong_width(%A: tensor<?x?xf32, #csr>) -> tensor<?xi64> {
  // expected-error@+1 {{sparse_iter.positions result must be a rank-1 tensor of i32 (e.g. tensor<?xi32>), got tensor<?xi64>}}
  %p = "sparse_iter.positions"(%A) {level = 1 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?xi64>
  return %p : tensor<?xi64>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#enc = #sparse_iter.layout<{map = (i) -> (i : dense), posWidth = 32, crdWidth = 32}>

func.func @encoded_values(%A: tensor<?x?xf32, #csr>) -> tensor<?xf32, #enc> {
  // expected-error@+1 {{sparse_iter.values result must not carry an encoding, got tensor<?xf32, #sparse_iter.layout}}
  %v = "sparse_iter.values"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?xf32, #enc>
  return %v : tensor<?xf32, #enc>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csr64 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 64, crdWidth = 64}>

func.func @with_values_changes_type(%A: tensor<?x?xf32, #csr>, %v: tensor<?xf32>) -> tensor<?x?xf32, #csr64> {
  // expected-error@+1 {{sparse_iter.with_values result must have the type of its tensor operand}}
  %o = "sparse_iter.with_values"(%A, %v) : (tensor<?x?xf32, #csr>, tensor<?xf32>) -> tensor<?x?xf32, #csr64>
  return %o : tensor<?x?xf32, #csr64>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @with_values_wrong_type(%A: tensor<?x?xf32, #csr>, %v: tensor<?xf64>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{sparse_iter.with_values values operand must be a rank-1 tensor of f32 (e.g. tensor<?xf32>), got tensor<?xf64>}}
  %o = "sparse_iter.with_values"(%A, %v) : (tensor<?x?xf32, #csr>, tensor<?xf64>) -> tensor<?x?xf32, #csr>
  return %o : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @assemble_missing_size(%p: tensor<?xi32>, %c: tensor<?xi32>, %v: tensor<?xf32>, %m: index) -> tensor<?x?xf32, #csr> {
  // expected-error-re@+1 {{sparse_iter.assemble of tensor<?x?xf32, #sparse_iter.layout<{{.*}}>> takes the positions, then the coordinates of its levels, its values and one index per dimension (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index, index), got (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index)}}
  %t = "sparse_iter.assemble"(%p, %c, %v, %m) {operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index) -> tensor<?x?xf32, #csr>
  return %t : tensor<?x?xf32, #csr>
}

// -----

func.func @assemble_plain(%v: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{sparse_iter.assemble result needs a single #sparse_iter.layout, got tensor<?xf32>}}
  %t = "sparse_iter.assemble"(%v) {operandSegmentSizes = array<i32: 0, 0, 1, 0>} : (tensor<?xf32>) -> tensor<?xf32>
  return %t : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#hyb = #sparse_iter.composable<[#sparse_iter.part<rest, #csr>]>

func.func @get_part_out_of_range(%A: tensor<?x?xf32, #hyb>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{sparse_iter.get_part index 1 is out of range for 1 parts}}
  %p = "sparse_iter.get_part"(%A) {index = 1 : i64} : (tensor<?x?xf32, #hyb>) -> tensor<?x?xf32, #csr>
  return %p : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csr64 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 64, crdWidth = 64}>
#hyb = #sparse_iter.composable<[#sparse_iter.part<rest, #csr>]>

func.func @get_part_wrong_layout(%A: tensor<?x?xf32, #hyb>) -> tensor<?x?xf32, #csr64> {
  // expected-error-re@+1 {{sparse_iter.get_part result must be the tensor's shape and element type in part 0's layout {{.*}}}}
  %p = "sparse_iter.get_part"(%A) {index = 0 : i64} : (tensor<?x?xf32, #hyb>) -> tensor<?x?xf32, #csr64>
  return %p : tensor<?x?xf32, #csr64>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @get_part_of_single_layout(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  // expected-error-re@+1 {{sparse_iter.get_part needs a tensor with a #sparse_iter.composable layout, got {{.*}}}}
  %p = "sparse_iter.get_part"(%A) {index = 0 : i64} : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr>
  return %p : tensor<?x?xf32, #csr>
}
