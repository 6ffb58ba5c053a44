// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics

// The dialect's parsers check the syntax and report at the offending token;
// layout syntax errors are in layout-invalid.mlir.

// expected-error@+1 {{expected a sparsity kind, unquoted: unstructured, nm[n, m], block[r, c] or ragged (#sparse_iter.sparsity<ragged, density = 0.1>)}}
func.func private @kind_not_bare(tensor<?xf32, #sparse_iter.sparsity<"unstructured">>)

// -----

// expected-error@+1 {{expected integer value}}
func.func private @params_not_integers(tensor<?xf32, #sparse_iter.sparsity<nm[2, x]>>)

// -----

// expected-error@+1 {{expected 'density'}}
func.func private @density_key(tensor<?xf32, #sparse_iter.sparsity<unstructured, dens = 0.1>>)

// -----

// expected-error@+2 {{expected '<'}}
// expected-error@+1 {{failed to parse SparseIter_EncodingAttr parameter 'sparsity' which is to be a `SparsityAttr`}}
func.func private @sparsity_not_nested(tensor<?xf32, #sparse_iter.encoding<"unstructured", op_name = "", operand = 0, element_types = [], indexing_maps = []>>)

// -----

// expected-error@+1 {{expected floating point literal}}
func.func private @sparsifier_params() attributes {s = #sparse_iter.sparsifier<threshold[x]>}

// -----

// expected-error@+1 {{invalid kind of attribute specified}}
func.func private @part_layout() attributes {p = #sparse_iter.part<rest, #sparse_iter.sparsity<ragged>>}

// -----

// The positional syntax of earlier versions is refused.
// expected-error@+1 {{expected a sparsity kind, unquoted: unstructured, nm[n, m], block[r, c] or ragged (#sparse_iter.sparsity<ragged, density = 0.1>)}}
func.func private @positional(tensor<?xf32, #sparse_iter.sparsity<"unstructured", array<i64>, 1.000000e-02 : f64>>)

// -----

func.func @set_on_memref(%m: memref<?xf32>) {
  // expected-error@+1 {{'sparse_iter.set_encoding' op operand #0 must be ranked tensor of any type values, but got 'memref<?xf32>'}}
  %0 = "sparse_iter.set_encoding"(%m) : (memref<?xf32>) -> tensor<?xf32>
  return
}

// -----

// Value rules are checked after parsing (sparsecomp.ir.verify); layouts in
// layout-invalid.mlir, targets in target-invalid.mlir.

// expected-error@+1 {{unknown sparsity kind 'diagonal'; expected one of unstructured, nm, block, ragged}}
func.func private @bad_kind(tensor<?xf32, #sparse_iter.sparsity<diagonal>>)

// -----

// expected-error@+1 {{sparsity 'nm' takes 2 params, got 1}}
func.func private @nm_arity(tensor<?xf32, #sparse_iter.sparsity<nm[2], density = 0.5>>)

// -----

// expected-error@+1 {{n:m sparsity needs 0 < n <= m, got 5:4}}
func.func private @nm_order(tensor<?xf32, #sparse_iter.sparsity<nm[5, 4], density = 0.5>>)

// -----

// expected-error@+1 {{block sizes must be positive, got 0x4}}
func.func private @block_zero(tensor<?xf32, #sparse_iter.sparsity<block[0, 4], density = 0.5>>)

// -----

// expected-error@+1 {{density must lie in [0, 1], got 1.5}}
func.func private @density(tensor<?xf32, #sparse_iter.sparsity<unstructured, density = 1.5>>)

// -----

#s = #sparse_iter.sparsity<unstructured, density = 0.1>
// expected-error@+1 {{operand must be a non-negative integer, got -1}}
func.func private @negative_index(tensor<?xf32, #sparse_iter.encoding<#s, op_name = "", operand = -1, element_types = [], indexing_maps = []>>)

// -----

#s = #sparse_iter.sparsity<unstructured, density = 0.1>
// expected-error@+1 {{operand 2 is out of range for 1 indexing maps}}
func.func private @index_range(tensor<?xf32, #sparse_iter.encoding<#s, op_name = "linalg.generic", operand = 2, element_types = [f32], indexing_maps = [affine_map<(i) -> (i)>]>>)

// -----

#s = #sparse_iter.sparsity<unstructured, density = 0.1>
// expected-error@+1 {{element_types must be an array of types, got [1]}}
func.func private @types_not_types(tensor<?xf32, #sparse_iter.encoding<#s, op_name = "", operand = 0, element_types = [1], indexing_maps = []>>)

// -----

#s = #sparse_iter.sparsity<unstructured, density = 0.1>
// expected-error@+1 {{indexing_maps must be an array of affine maps, got ["x"]}}
func.func private @maps_not_maps(tensor<?xf32, #sparse_iter.encoding<#s, op_name = "", operand = 0, element_types = [], indexing_maps = ["x"]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @set_without_encoding(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{set_encoding result must carry a #sparse_iter encoding, got tensor<?x?xf32>}}
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @set_changes_shape(%x: tensor<4x?xf32>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{sparse_iter.set_encoding must keep shape and element type}}
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<4x?xf32>) -> tensor<?x?xf32, #csr>
  return %0 : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @set_same_encoding(%x: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{sparse_iter.set_encoding does not change the encoding of tensor<?x?xf32, #sparse_iter.layout}}
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr>
  return %0 : tensor<?x?xf32, #csr>
}

// -----

// A change of encoding starts from a #sparse_iter encoding, not a foreign one.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @set_on_foreign(%x: tensor<?x?xf32, #CSR>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{sparse_iter.set_encoding source must be plain or carry a #sparse_iter encoding, got tensor<?x?xf32, #sparse_tensor.encoding}}
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32, #CSR>) -> tensor<?x?xf32, #csr>
  return %0 : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>
func.func @unset_to_encoded(%x: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc> {
  // expected-error@+1 {{sparse_iter.unset_encoding result must not carry an encoding, got tensor<?x?xf32, #sparse_iter.layout}}
  %0 = "sparse_iter.unset_encoding"(%x) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc>
  return %0 : tensor<?x?xf32, #csc>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @unset_changes_type(%x: tensor<?x?xf32, #csr>) -> tensor<?x?xf64> {
  // expected-error@+1 {{sparse_iter.unset_encoding must keep shape and element type}}
  %0 = "sparse_iter.unset_encoding"(%x) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf64>
  return %0 : tensor<?x?xf64>
}

// -----

func.func @unset_plain(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{unset_encoding source must carry a #sparse_iter encoding, got tensor<?x?xf32>}}
  %0 = "sparse_iter.unset_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @sparsify_plain(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{sparsify result must carry a #sparse_iter encoding, got tensor<?x?xf32>}}
  %0 = "sparse_iter.sparsify"(%x) {sparsifier = #sparse_iter.sparsifier<keep_all>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @sparsify_changes_type(%x: tensor<?x?xf32>) -> tensor<?x?xf16, #csr> {
  // expected-error@+1 {{sparse_iter.sparsify must keep shape and element type}}
  %0 = "sparse_iter.sparsify"(%x) {sparsifier = #sparse_iter.sparsifier<keep_all>} : (tensor<?x?xf32>) -> tensor<?x?xf16, #csr>
  return %0 : tensor<?x?xf16, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
func.func @sparsify_without_sparsifier(%x: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{'sparse_iter.sparsify' op requires attribute 'sparsifier'}}
  %0 = "sparse_iter.sparsify"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  return %0 : tensor<?x?xf32, #csr>
}

// -----

// An element type the lowering has no form for: refused at the verifier, not an
// internal error in lower-iterations (session 44).
// expected-error@+1 {{a sparse tensor's element type f80 is not supported: i1 to i64, f16, bf16, f32, f64 and complex ones are}}
func.func private @f80(tensor<?x?xf80, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>)
