//===- sparse_iter.td - the sparse_iter dialect ------------*- tablegen -*-===//
//
// The single source of truth for the sparse_iter dialect. Three artifacts are
// generated from this file by `python -m sparsecomp.ir.odsgen` (CMake target
// `sparse_iter-gen`, or automatically on first use):
//   * the IRDL registration loaded into every sparsecomp context,
//   * the Python op classes (mlir-tblgen -gen-python-op-bindings),
//   * docs/dialect.md (mlir-tblgen -gen-dialect-doc).
// The dialect is registered at run time through IRDL, so ops print in generic
// form and attributes print their parameters positionally:
//   #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<...>, 32, 32>
// Semantic rules IRDL cannot express live in python/sparsecomp/ir/verify.py.
//
//===----------------------------------------------------------------------===//

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def SparseIter_Dialect : Dialect {
  let name = "sparse_iter";
  let cppNamespace = "::sparsecomp::sparse_iter";
  let summary = "Sparse iteration: encodings, layouts and sparse leaf ops";
  let description = [{
    The `sparse_iter` dialect carries the sparse data model of sparsecomp.

    Tensors in ordinary `func`/`linalg`/`tensor` programs carry a
    `#sparse_iter` attribute as their encoding. An *unresolved* encoding
    (`#sparse_iter.encoding`) says how the tensor is used and what is known
    about its sparsity, in the style of IREE's `#iree_encoding.encoding`; a
    target's resolver later turns it into a *resolved* storage layout
    (`#sparse_iter.layout`) for one device.

    Loops are not part of the dialect: lowering produces `scf` loops over
    position space. The dialect only holds attributes and leaf ops.
  }];
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class SparseIter_Attr<string name, string attrMnemonic>
    : AttrDef<SparseIter_Dialect, name> {
  let mnemonic = attrMnemonic;
  // IRDL provides the parser and printer: parameters in declaration order.
  let hasCustomAssemblyFormat = 1;
}

def SparseIter_SparsityAttr : SparseIter_Attr<"Sparsity", "sparsity"> {
  let summary = "What is known about the sparsity pattern of a tensor";
  let description = [{
    Describes the nonzero structure without choosing a storage layout.

    * `kind`: one of `"unstructured"`, `"nm"` (n nonzeros in every m
      consecutive elements along the innermost dimension), `"block"`
      (nonzeros come in dense R x C blocks) or `"ragged"` (rows of varying
      length).
    * `params`: the kind's parameters: `[n, m]` for `"nm"`, `[R, C]` for
      `"block"`, `[]` otherwise.
    * `density`: expected fraction of nonzeros in `[0, 1]`; `1.0` when
      unknown.

    Example:

    ```mlir
    #sparse_iter.sparsity<"nm", array<i64: 2, 4>, 5.000000e-01 : f64>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::StringAttr", "sparsity kind">:$kind,
    AttrParameter<"::mlir::DenseI64ArrayAttr", "parameters of the kind">:$params,
    AttrParameter<"::mlir::FloatAttr", "expected density">:$density
  );
}

def SparseIter_EncodingAttr : SparseIter_Attr<"Encoding", "encoding"> {
  let summary = "Unresolved encoding: how a sparse tensor is used";
  let description = [{
    An encoding that records the use of a tensor, not its storage: the
    sparsity that is known, the op that consumes it (`op_name`, `""` when
    not yet attached to an op), which operand it is, the element types of
    all operands of that op and the op's indexing maps. A target's resolver
    (`sparse-iter-specialize-encodings`) turns it into a
    `#sparse_iter.layout`.

    Example:

    ```mlir
    #sparse_iter.encoding<#sparse_iter.sparsity<"unstructured", array<i64>, 1.000000e-02 : f64>,
                          "linalg.matmul", 0 : i64, [f32, f32, f32],
                          [affine_map<(m, n, k) -> (m, k)>,
                           affine_map<(m, n, k) -> (k, n)>,
                           affine_map<(m, n, k) -> (m, n)>]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"SparsityAttr", "known sparsity">:$sparsity,
    AttrParameter<"::mlir::StringAttr", "consuming op name or empty">:$op_name,
    AttrParameter<"::mlir::IntegerAttr", "operand index in the consuming op">:$operand_index,
    AttrParameter<"::mlir::ArrayAttr", "element types of the op's operands">:$element_types,
    AttrParameter<"::mlir::ArrayAttr", "indexing maps of the op">:$indexing_maps
  );
}

def SparseIter_LayoutAttr : SparseIter_Attr<"Layout", "layout"> {
  let summary = "Resolved storage layout of a sparse tensor";
  let description = [{
    A concrete storage decision, as SparseTIR's sparse iterators and MLIR's
    level formats describe it.

    * `levels`: one format per storage level, each a string:
      `"dense_fixed"`, `"dense_varied"` (ragged), `"compressed_fixed"`
      (ELL), `"compressed_varied"` (CSR-like), `"singleton"` (COO) or
      `"structured[n,m]"` (n:m).
    * `dim_to_lvl`: the map from tensor dimensions to storage levels; a
      permutation for CSC, `floordiv`/`mod` for blocks.
    * `pos_width`, `crd_width`: bit widths of positions and coordinates
      (8, 16, 32 or 64; 0 means index width).

    Example (CSR with 32-bit indices):

    ```mlir
    #sparse_iter.layout<["dense_fixed", "compressed_varied"],
                        affine_map<(i, j) -> (i, j)>, 32 : i64, 32 : i64>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::ArrayAttr", "level formats">:$levels,
    AttrParameter<"::mlir::AffineMapAttr", "dimension to level map">:$dim_to_lvl,
    AttrParameter<"::mlir::IntegerAttr", "position bit width">:$pos_width,
    AttrParameter<"::mlir::IntegerAttr", "coordinate bit width">:$crd_width
  );
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

class SparseIter_Op<string mnemonic, list<Trait> traits = []>
    : Op<SparseIter_Dialect, mnemonic, traits>;

def SparseIter_SetEncodingOp : SparseIter_Op<"set_encoding", [Pure]> {
  let summary = "Attach a sparse_iter encoding to a tensor";
  let description = [{
    Returns `source` as a tensor of the same shape and element type whose
    type carries a `#sparse_iter` encoding. The result type must differ
    from the source type only in its encoding.

    Example:

    ```mlir
    %1 = "sparse_iter.set_encoding"(%0)
        : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
}

def SparseIter_UnsetEncodingOp : SparseIter_Op<"unset_encoding", [Pure]> {
  let summary = "Drop the sparse_iter encoding of a tensor";
  let description = [{
    Returns the encoded `source` as a plain tensor of the same shape and
    element type. `unset_encoding(set_encoding(%x))` is `%x`
    (`sparse-iter-fold-encodings`).

    Example:

    ```mlir
    %2 = "sparse_iter.unset_encoding"(%1)
        : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
}
