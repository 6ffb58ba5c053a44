//===- sparse_iter.td - the sparse_iter dialect ------------*- tablegen -*-===//
//
// The single source of truth for the sparse_iter dialect. `pip install`
// builds it (dialects/build.py, run by setup.py): mlir-tblgen generates the
// C++ that SparseIterDialect.cpp compiles into the dialect library, the
// Python op classes and a table of attribute parameter names; docs/dialect.md
// is generated from it too (`python -m sparsecomp.ir.odsgen --doc`).
// Attributes have readable syntax close to upstream's sparse_tensor:
//   #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
//   #sparse_iter.sparsity<nm[2, 4]>
// Ops have assembly formats (`sparse_iter.positions %A[1] : ... -> ...`); the
// generic form parses too. Semantic rules not expressed here live in
// python/sparsecomp/ir/verify.py.
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
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class SparseIter_Attr<string name, string attrMnemonic>
    : AttrDef<SparseIter_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def SparseIter_SparsityAttr : SparseIter_Attr<"Sparsity", "sparsity"> {
  let summary = "What is known about the sparsity pattern of a tensor";
  let description = [{
    Describes the nonzero structure without choosing a storage layout:

    * `unstructured`: no pattern is known.
    * `nm[n, m]`: n nonzeros in every m consecutive elements along the
      innermost dimension.
    * `block[R, C]`: nonzeros come in dense R x C blocks.
    * `ragged`: rows of varying length.

    and, optionally, `density = d`: the expected fraction of nonzeros, in
    `[0, 1]` (1 when unknown; not printed then).

    Numbers print in the shortest form that reads back exactly (`0.01`,
    `1.0e-05`); integers without a decimal point.

    Examples:

    ```mlir
    #sparse_iter.sparsity<unstructured, density = 0.01>
    #sparse_iter.sparsity<nm[2, 4]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::StringAttr", "sparsity kind">:$kind,
    AttrParameter<"::mlir::DenseI64ArrayAttr", "parameters of the kind">:$params,
    AttrParameter<"::mlir::FloatAttr", "expected density">:$density
  );
  let hasCustomAssemblyFormat = 1;
}

def SparseIter_EncodingAttr : SparseIter_Attr<"Encoding", "encoding"> {
  let summary = "Unresolved encoding: how a sparse tensor is used";
  let description = [{
    An encoding that records the use of a tensor, not its storage: the
    sparsity that is known, the op that consumes it (`op_name`, `""` when
    not yet attached to an op), which of its operands the tensor is
    (`operand`), the element types of all operands of that op and the op's
    indexing maps. A target's resolver (`sparse-iter-specialize-encodings`)
    turns it into a `#sparse_iter.layout`. The named parameters may come in
    any order; they print in this one.

    Example:

    ```mlir
    #sparse_iter.encoding<#sparse_iter.sparsity<unstructured, density = 0.01>,
        op_name = "linalg.matmul", operand = 0, element_types = [f32, f32, f32],
        indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                         affine_map<(d0, d1, d2) -> (d2, d1)>,
                         affine_map<(d0, d1, d2) -> (d0, d1)>]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"SparsityAttr", "known sparsity">:$sparsity,
    AttrParameter<"::mlir::StringAttr", "consuming op name or empty">:$op_name,
    AttrParameter<"int64_t", "operand index in the consuming op">:$operand,
    AttrParameter<"::mlir::ArrayAttr", "element types of the op's operands">:$element_types,
    AttrParameter<"::mlir::ArrayAttr", "indexing maps of the op">:$indexing_maps
  );
  let assemblyFormat = "`<` qualified($sparsity) `,` struct($op_name, $operand, $element_types, $indexing_maps) `>`";
}

def SparseIter_LayoutAttr : SparseIter_Attr<"Layout", "layout"> {
  let summary = "Resolved storage layout of a sparse tensor";
  let description = [{
    A concrete storage decision, written as MLIR's `#sparse_tensor.encoding`
    writes one, with sparsecomp's additional level formats and options.
    `sparsecomp.formats.Layout` is its host-side twin: the two convert into
    each other losslessly.

    * `map`: the dimension-to-level map, each level expression followed by
      its level format. Each expression is `d`, `d floordiv c` or `d mod c`:
      the identity for CSR, a permutation for CSC, block splits for BSR and
      n:m. Dimensions may have any names; they print as `d0, d1, ...`.
    * Level formats: `dense`, `dense_varied` (a dense level whose parent
      rows have varying length), `compressed` (CSR-like), `compressed_fixed`
      (ELL; `compressed_fixed[8]` fixes the width), `loose_compressed` (a
      `(lo, hi)` position pair per parent), `singleton` (COO) or
      `structured[n, m]` (n:m, last level only), optionally followed by
      properties as in upstream MLIR: `compressed(nonunique)`,
      `singleton(nonordered, soa)`.
    * `posWidth`, `crdWidth`: bit widths of positions and coordinates (8,
      16, 32 or 64); 0, the default and not printed, means index width.
    * `indexGroup = "name"`: tensors with the same group and the same levels
      share their positions and coordinates buffers (SparseTIR's SDDMM,
      where the sampled matrix and the output share `indptr`/`indices`).
    * `nmMetadata`: how a `structured` level stores its coordinates:
      `indices` (one small integer per kept element, the default) or
      `mma_sp_m16n8k16` / `mma_sp_m16n8k32` (packed 2-bit indices in the
      register order of PTX `mma.sp`, 2:4 only).

    The keys may come in any order; they print in this one. Examples (CSR
    with 32-bit indices, BSR 16x16, 2:4 for `mma.sp`):

    ```mlir
    #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                         posWidth = 32, crdWidth = 32}>
    #sparse_iter.layout<{map = (i, j) -> (i floordiv 16 : dense, j floordiv 16 : compressed,
                                          i mod 16 : dense, j mod 16 : dense),
                         posWidth = 32, crdWidth = 32}>
    #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense,
                                          j mod 4 : structured[2, 4]),
                         posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k16}>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::ArrayAttr", "level formats, as printed">:$levels,
    AttrParameter<"::mlir::AffineMap", "dimension to level map">:$dim_to_lvl,
    AttrParameter<"unsigned", "position bit width (0: index)">:$pos_width,
    AttrParameter<"unsigned", "coordinate bit width (0: index)">:$crd_width,
    AttrParameter<"::mlir::StringAttr", "index group, or empty">:$index_group,
    AttrParameter<"::mlir::StringAttr", "n:m metadata layout, or empty">:$nm_metadata
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def SparseIter_PartAttr : SparseIter_Attr<"Part", "part"> {
  let summary = "One part of a composable layout and the rule that fills it";
  let description = [{
    Parts take, in order, the nonzeros that earlier parts left:

    * `ell_bucket[p, P, lo, hi]`: in column partition `p` of `P` equal
      partitions (width `ceil(ncols / P)`), the rows with more than `lo` and
      at most `hi` remaining nonzeros there. The layout is a row list plus
      `hi` slots per row: `(i, j) -> (i : compressed, j : compressed_fixed[hi])`.
    * `block_dense[R, C, k]`: aligned R x C blocks holding at least `k`
      remaining nonzeros; the layout is R x C blocked.
    * `rest`: every remaining nonzero; the last part.

    Example:

    ```mlir
    #sparse_iter.part<ell_bucket[0, 1, 2, 4],
        #sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed, d1 : compressed_fixed[4]),
                             posWidth = 32, crdWidth = 32}>>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::StringAttr", "assignment rule">:$rule,
    AttrParameter<"::mlir::DenseI64ArrayAttr", "rule parameters">:$params,
    AttrParameter<"LayoutAttr", "storage of this part">:$layout
  );
  let hasCustomAssemblyFormat = 1;
}

def SparseIter_ComposableAttr : SparseIter_Attr<"Composable", "composable"> {
  let summary = "A tensor split into parts, each in its own layout";
  let description = [{
    SparseTIR's composable formats: one tensor stored as several
    `#sparse_iter.part`s, e.g. ELL buckets by row length plus a CSR
    remainder (hyb), or dense-enough 16x16 blocks in BSR plus a CSR
    remainder. Every nonzero lives in exactly one part; the last part's
    rule is `rest`. Kernels over a composable tensor run one loop nest per
    part and add the partial results.

    Example (one ELL bucket of width 1, CSR for the rest; `#ell1` and
    `#csr` stand for layouts):

    ```mlir
    #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 1, 0, 1], #ell1>,
                             #sparse_iter.part<rest, #csr>]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::ArrayAttr", "#sparse_iter.part list">:$parts
  );
  let assemblyFormat = "`<` qualified($parts) `>`";
}

//===----------------------------------------------------------------------===//
// Readable parameters: bare identifiers and lists of them
//===----------------------------------------------------------------------===//

def SparseIter_KeywordParameter
    : AttrParameter<"::mlir::StringAttr", "a bare identifier"> {
  let parser = [{ ::sparsecomp::sparse_iter::parseKeyword($_parser) }];
  let printer = [{ $_printer << $_self.getValue() }];
}

def SparseIter_KeywordListParameter
    : AttrParameter<"::mlir::ArrayAttr", "a list of bare identifiers"> {
  let parser = [{ ::sparsecomp::sparse_iter::parseKeywordList($_parser) }];
  let printer = [{ ::sparsecomp::sparse_iter::printKeywordList($_printer, $_self) }];
}

def SparseIter_OptionalKeywordListParameter
    : OptionalParameter<"::mlir::ArrayAttr", "a list of bare identifiers, or none"> {
  let parser = [{ ::sparsecomp::sparse_iter::parseKeywordList($_parser) }];
  let printer = [{ ::sparsecomp::sparse_iter::printKeywordList($_printer, $_self) }];
}

def SparseIter_OptionalKeywordParameter
    : OptionalParameter<"::mlir::StringAttr", "a bare identifier, or none"> {
  let parser = [{ ::sparsecomp::sparse_iter::parseKeyword($_parser) }];
  let printer = [{ $_printer << $_self.getValue() }];
}

def SparseIter_SmParameter : AttrParameter<"int64_t", "compute capability, sm_XY"> {
  let parser = [{ ::sparsecomp::sparse_iter::parseSm($_parser) }];
  let printer = [{ $_printer << "sm_" << $_self }];
}

def SparseIter_CpuTargetAttr : SparseIter_Attr<"CpuTarget", "cpu"> {
  let summary = "A CPU target description";
  let description = [{
    What a CPU layout resolver and the CPU lowering need to know: the
    architecture (`x86_64`, `aarch64`), ISA features (`avx2`, `fma`,
    `avx512f`, `neon`, ...), the vector register width in bits and the
    number of threads (0: all cores); `vector_bits = 0` asks for scalar
    code; optionally, `tune = intel` or `tune = amd`: the vendor's cores to
    tune the code for (a choice of code generation, never of where the code
    runs; the host target sets it from `/proc/cpuinfo`). The named parameters
    may come in any order; they print in this one. Targets are named in the module
    attribute `sparse_iter.targets`; a function selects one with the
    attribute `sparse_iter.target`.

    Example:

    ```mlir
    module attributes {sparse_iter.targets = {host = #sparse_iter.cpu<x86_64,
        features = [avx2, fma], vector_bits = 256, threads = 0>}} {}
    ```
  }];
  let parameters = (ins
    SparseIter_KeywordParameter:$arch,
    SparseIter_KeywordListParameter:$features,
    AttrParameter<"int64_t", "vector width in bits">:$vector_bits,
    AttrParameter<"int64_t", "threads, 0 for all cores">:$threads,
    SparseIter_OptionalKeywordParameter:$tune
  );
  let assemblyFormat = "`<` $arch `,` struct($features, $vector_bits, $threads, $tune) `>`";
}

def SparseIter_CudaTargetAttr : SparseIter_Attr<"CudaTarget", "cuda"> {
  let summary = "An NVIDIA GPU target description";
  let description = [{
    The compute capability (`sm_80`, `sm_90`) and the MMA instruction
    shapes the resolver may plan for: dense tensor-core shapes (`mma.sync`,
    e.g. `m16n8k16`) and sparse ones (`mma.sp`, 2:4, e.g. `m16n8k32`).

    Either list may be left out: the target then has every shape of that
    kind its compute capability runs (`#sparse_iter.cuda<sm_90>`, as the
    `cuda:sm_90` target string means).

    Example:

    ```mlir
    #sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16, m16n8k8],
                      sparse_mma_shapes = [m16n8k16, m16n8k32]>
    ```
  }];
  let parameters = (ins
    SparseIter_SmParameter:$sm,
    SparseIter_OptionalKeywordListParameter:$mma_shapes,
    SparseIter_OptionalKeywordListParameter:$sparse_mma_shapes
  );
  let assemblyFormat =
      "`<` $sm (`,` struct($mma_shapes, $sparse_mma_shapes)^)? `>`";
}

def SparseIter_SparsifierAttr : SparseIter_Attr<"Sparsifier", "sparsifier"> {
  let summary = "How to choose the nonzeros of a dense value (STen sparsifiers)";
  let description = [{
    * `keep_all`: every nonzero element (NaN is kept).
    * `threshold[t]`: the elements with `|x| >= t`, `t >= 0`, compared
      exactly (magnitudes are widened to f64; `t` is not narrowed).
    * `random_fraction[s, seed]`: removes `round(s * N)` of the `N`
      elements, drawn uniformly at random from `seed`, independently of the
      values.
    * `scalar_fraction[s]`: removes the `round(s * N)` elements of
      smallest magnitude.
    * `block_fraction[R, C, s]`: removes the `round(s * B)` of the `B`
      aligned R x C blocks of the last two dimensions (edge blocks may be
      partial) with the smallest L1 norm; kept blocks are kept whole.
    * `nm[n, m]`: the n largest-magnitude elements of every m
      consecutive ones along the innermost dimension (a shorter last group
      keeps min(n, its length)).

    As in STen, `s` is the sparsity: the fraction *removed*, in [0, 1];
    `round` rounds halves up. Ties keep the lower row-major index. The
    magnitude-based kinds never keep NaN. Except for `keep_all`, kept
    positions are stored even where the value is zero.

    `sparsecomp.sparsify` applies the same sparsifiers to host arrays.

    Parameters are numbers, printed as `#sparse_iter.sparsity` prints
    them (`0.5`, `16`, `1.0e-05`).

    Examples:

    ```mlir
    #sparse_iter.sparsifier<threshold[0.001]>
    #sparse_iter.sparsifier<block_fraction[16, 16, 0.75]>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::StringAttr", "sparsifier kind">:$kind,
    AttrParameter<"::mlir::DenseF64ArrayAttr", "parameters of the kind">:$params
  );
  let hasCustomAssemblyFormat = 1;
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

    Folds `set_encoding(unset_encoding(%y))` to `%y` when the types agree
    (a round trip, not a change of layout), and a `set_encoding` whose
    result type is its source type to the source.

    Example:

    ```mlir
    %1 = sparse_iter.set_encoding %0 : tensor<?x?xf32> to tensor<?x?xf32, #csr>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasFolder = 1;
}

def SparseIter_UnsetEncodingOp : SparseIter_Op<"unset_encoding", [Pure]> {
  let summary = "Drop the sparse_iter encoding of a tensor";
  let description = [{
    Returns the encoded `source` as a plain tensor of the same shape and
    element type. `unset_encoding(set_encoding(%x))` folds to `%x` when the
    types agree (`canonicalize` and `sparse-iter-fold-encodings` apply it).

    Example:

    ```mlir
    %2 = sparse_iter.unset_encoding %1 : tensor<?x?xf32, #csr> to tensor<?x?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasFolder = 1;
}

def SparseIter_SparsifyOp : SparseIter_Op<"sparsify", [Pure]> {
  let summary = "Keep the nonzeros a sparsifier chooses";
  let description = [{
    Returns the elements of `source` that `sparsifier` keeps, as a tensor of
    the same shape and element type whose type carries a `#sparse_iter`
    encoding or layout; the other elements are zero. The CPU lowering fuses
    streaming sparsifiers (`keep_all`, `threshold`) into the loop that
    produces `source`.

    Example:

    ```mlir
    %s = sparse_iter.sparsify %d with <threshold[0.001]>
        : tensor<?x?xf32> to tensor<?x?xf32, #csr>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source, SparseIter_SparsifierAttr:$sparsifier);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source `with` $sparsifier attr-dict `:` type($source) `to` type($result)";
}

//===----------------------------------------------------------------------===//
// Stage II access ops (sparse-iter-lower-iterations -> sparse-iter-lower-buffers)
//===----------------------------------------------------------------------===//

def SparseIter_PositionsOp : SparseIter_Op<"positions", [Pure]> {
  let summary = "The positions buffer of one level of an encoded tensor";
  let description = [{
    Returns the positions of level `level` of `tensor`, whose type carries a
    `#sparse_iter.layout`, as a rank-1 tensor of the layout's position width
    (`i64` for width 0). Only levels that store positions (`dense_varied`,
    `compressed`, `loose_compressed`) have them. Produced by
    `sparse-iter-lower-iterations`; `sparse-iter-lower-buffers` replaces it
    with the buffer itself.

    Example:

    ```mlir
    %pos = sparse_iter.positions %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor, I64Attr:$level);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$tensor `[` $level `]` attr-dict `:` type($tensor) `->` type($result)";
}

def SparseIter_CoordinatesOp : SparseIter_Op<"coordinates", [Pure]> {
  let summary = "The coordinates buffer of one level of an encoded tensor";
  let description = [{
    Returns the coordinates of level `level` of `tensor` as a rank-1 tensor
    of the layout's coordinate width (`i64` for width 0). Every level format
    but `dense` and `dense_varied` stores coordinates.

    Example:

    ```mlir
    %crd = sparse_iter.coordinates %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor, I64Attr:$level);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$tensor `[` $level `]` attr-dict `:` type($tensor) `->` type($result)";
}

def SparseIter_ValuesOp : SparseIter_Op<"values", [Pure]> {
  let summary = "The values buffer of an encoded tensor";
  let description = [{
    Returns the values of `tensor`, one per position of its last level, as a
    rank-1 tensor of its element type.

    Example:

    ```mlir
    %val = sparse_iter.values %A : tensor<?x?xf32, #csr> -> tensor<?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$tensor attr-dict `:` type($tensor) `->` type($result)";
}

def SparseIter_StorageSizeOp : SparseIter_Op<"storage_size", [Pure]> {
  let summary = "The bytes an encoded tensor's buffers take on its device";
  let description = [{
    Returns the bytes of all buffers of `tensor`: positions, coordinates
    and values of every level (of every part, for a composable layout), at
    the layout's widths; for a tensor without an encoding, its dense size.
    Buffer lowering (`sparse-iter-lower-buffers`) computes it from the
    lengths of the buffers, so it is exact for the data at hand;
    `sparsecomp.formats.storage_bytes` is the host-side formula, which a
    host program uses to allocate before it packs.

    Example:

    ```mlir
    %bytes = sparse_iter.storage_size %A : tensor<?x?xf32, #csr>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor);
  let results = (outs Index:$bytes);
  let assemblyFormat = "$tensor attr-dict `:` type($tensor)";
}

def SparseIter_WithValuesOp : SparseIter_Op<"with_values", [Pure]> {
  let summary = "An encoded tensor with the index structure of another and new values";
  let description = [{
    Returns a tensor of the type of `tensor` that shares its positions,
    coordinates and dimension sizes and holds `values` (rank 1, one per
    position of the last level). This is how a kernel whose sparse output
    has the structure of a sparse input (SDDMM, sparse x dense elementwise)
    builds its result.

    Example:

    ```mlir
    %out = sparse_iter.with_values %S, %vals
        : tensor<?x?xf32, #csr>, tensor<?xf32> -> tensor<?x?xf32, #csr>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor, AnyRankedTensor:$values);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$tensor `,` $values attr-dict `:` type($tensor) `,` type($values) `->` type($result)";
}

def SparseIter_AssembleOp : SparseIter_Op<"assemble", [Pure, AttrSizedOperandSegments]> {
  let summary = "An encoded tensor built from its buffers and dimension sizes";
  let description = [{
    Returns a tensor of the result type (which carries a single
    `#sparse_iter.layout`) whose storage is exactly the operands: the
    `positions` of each level that stores them and the `coordinates` of each
    level that stores them, in level order (rank-1 tensors of the layout's
    position and coordinate widths), its `values` (rank 1, the element type)
    and one `index` size per dimension of the result, static ones included.
    This is how a kernel that computes a new sparsity structure (SpGEMM, the
    sum of differently structured operands, a sparsifier on an output)
    returns it; `sparse-iter-lower-buffers` passes the buffers on as they are.

    Example:

    ```mlir
    %C = sparse_iter.assemble positions(%pos : tensor<?xi32>)
        coordinates(%crd : tensor<?xi32>) values(%vals : tensor<?xf32>)
        sizes(%m, %n) -> tensor<?x?xf32, #csr>
    ```
  }];
  let arguments = (ins
    Variadic<AnyRankedTensor>:$positions,
    Variadic<AnyRankedTensor>:$coordinates,
    AnyRankedTensor:$values,
    Variadic<Index>:$sizes
  );
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "(`positions` `(` $positions^ `:` type($positions) `)`)? (`coordinates` `(` $coordinates^ `:` type($coordinates) `)`)? `values` `(` $values `:` type($values) `)` `sizes` `(` $sizes `)` attr-dict `->` type($result)";
}

def SparseIter_GetPartOp : SparseIter_Op<"get_part", [Pure]> {
  let summary = "One part of a tensor with a composable layout";
  let description = [{
    Returns part `index` of `tensor`, whose type carries a
    `#sparse_iter.composable` layout, as a tensor of the same shape and
    element type in that part's layout. The parts of a composable tensor
    hold disjoint sets of its nonzeros and sum to it, so a kernel that
    accumulates into its output (`out + f(a, ...)`) runs once per part.
    `sparse-iter-lower-iterations` creates these;
    `sparse-iter-lower-buffers` replaces each with the part's buffers.

    Example:

    ```mlir
    %p = sparse_iter.get_part %A[1] : tensor<?x?xf32, #hyb> -> tensor<?x?xf32, #ell4>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$tensor, I64Attr:$index);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$tensor `[` $index `]` attr-dict `:` type($tensor) `->` type($result)";
}
