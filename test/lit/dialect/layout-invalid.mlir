// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics

// Every rule of #sparse_iter.layout, #sparse_iter.part and
// #sparse_iter.composable (sparsecomp.formats.layout/levels/dimmap), checked
// after parsing. Each function is @negative_<rule>.

// expected-error@+1 {{unknown level format 'sparse'; expected one of dense_fixed, dense_varied, compressed_fixed, compressed_varied, loose_compressed, singleton, structured}}
func.func private @negative_level_name(tensor<?xf32, #sparse_iter.layout<["sparse"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{malformed level format 'compressed_varied(nonunique'}}
func.func private @negative_level_syntax(tensor<?xf32, #sparse_iter.layout<["compressed_varied(nonunique"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{level format 'compressed_varied[4]' takes no arguments in [...]}}
func.func private @negative_level_args(tensor<?xf32, #sparse_iter.layout<["compressed_varied[4]"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{level format arguments must be integers in 'compressed_fixed[k]'}}
func.func private @negative_level_arg_int(tensor<?xf32, #sparse_iter.layout<["compressed_fixed[k]"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{unknown level property 'sorted' in 'compressed_varied(sorted)'; expected nonunique, nonordered, soa}}
func.func private @negative_level_property(tensor<?xf32, #sparse_iter.layout<["compressed_varied(sorted)"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{compressed_fixed width must be positive, got 0}}
func.func private @negative_ell_width(tensor<?xf32, #sparse_iter.layout<["compressed_fixed[0]"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{dense levels take no properties: 'dense_fixed(nonunique)'}}
func.func private @negative_dense_nonunique(tensor<?xf32, #sparse_iter.layout<["dense_fixed(nonunique)"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{each level format must be a string, got 3 : i64}}
func.func private @negative_level_not_string(tensor<?xf32, #sparse_iter.layout<[3], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{a layout needs at least one level}}
func.func private @negative_no_levels(tensor<f32, #sparse_iter.layout<[], affine_map<() -> ()>, 32, 32, {}>>)

// -----

// expected-error@+1 {{pos_width must be one of 0, 8, 16, 32, 64, got 31}}
func.func private @negative_pos_width(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 31, 32, {}>>)

// -----

// expected-error@+1 {{crd_width must be one of 0, 8, 16, 32, 64, got 128}}
func.func private @negative_crd_width(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 32, 128, {}>>)

// -----

// expected-error@+1 {{dim_to_lvl has 2 results but the layout has 3 levels}}
func.func private @negative_map_levels(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{layout maps 2 dimensions but the tensor tensor<?xf32, }}
func.func private @negative_rank(tensor<?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{dimension d1 must appear once, or as 'd1 floordiv c' and 'd1 mod c' with the same c, in (d0, d1) -> (d0, d1, d1)}}
func.func private @negative_dim_twice(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j, j)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{dimension d1 must appear once, or as 'd1 floordiv c' and 'd1 mod c' with the same c}}
func.func private @negative_block_mismatch(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed"], affine_map<(i, j) -> (i, j floordiv 4, j mod 8)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{d1 mod must come after d1 floordiv}}
func.func private @negative_mod_first(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j mod 4, j floordiv 4)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{block size must be positive in 'd0 floordiv 0'}}
func.func private @negative_block_zero(tensor<?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i) -> (i floordiv 0, i mod 0)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{unsupported level expression 'd0 + d1' in 'affine_map<(d0, d1) -> (d0 + d1)>'; expected 'd', 'd floordiv c' or 'd mod c'}}
func.func private @negative_map_expr(tensor<?x?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i, j) -> (i + j)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{dimension-to-level maps take no symbols: 'affine_map<(d0)[s0] -> (d0)>'}}
func.func private @negative_map_symbols(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i)[s] -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{singleton level 1 must follow a nonunique compressed, loose_compressed or singleton level}}
func.func private @negative_singleton_after_unique(tensor<?x?xf32, #sparse_iter.layout<["compressed_varied", "singleton"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{structured level 1 must be the last level}}
func.func private @negative_structured_not_last(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "structured[2,4]", "dense_fixed"], affine_map<(i, j) -> (j floordiv 4, j mod 4, i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{structured[2,4] level needs 'd mod 4'}}
func.func private @negative_structured_map(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "structured[2,4]"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{structured[n,m] needs 0 < n <= m, got [5,4]}}
func.func private @negative_structured_nm(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[5,4]"], affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{unknown nm_metadata 'bitmask'; expected one of indices, mma_sp_m16n8k16, mma_sp_m16n8k32}}
func.func private @negative_nm_metadata(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[2,4]"], affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 32, {nm_metadata = "bitmask"}>>)

// -----

// expected-error@+1 {{nm_metadata 'mma_sp_m16n8k32' needs a structured[2,4] last level}}
func.func private @negative_mma_not_24(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[1,4]"], affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 32, {nm_metadata = "mma_sp_m16n8k32"}>>)

// -----

// expected-error@+1 {{nm_metadata needs a structured last level}}
func.func private @negative_nm_metadata_csr(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {nm_metadata = "indices"}>>)

// -----

// expected-error@+1 {{index_group must be an identifier, got '1 2'}}
func.func private @negative_index_group(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 32, 32, {index_group = "1 2"}>>)

// -----

// expected-error@+1 {{index_group must be a string, got 3 : i64}}
func.func private @negative_index_group_type(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 32, 32, {index_group = 3}>>)

// -----

// expected-error@+1 {{unknown layout option(s) padding}}
func.func private @negative_option(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 32, 32, {padding = 0}>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{#sparse_iter.part is not a tensor encoding; use sparsity, encoding, layout, composable}}
func.func private @negative_part_as_encoding(tensor<?x?xf32, #sparse_iter.part<"rest", array<i64>, #csr>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{unknown part rule 'diagonal'; expected one of ell_bucket, block_dense, rest}}
func.func private @negative_rule(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"diagonal", array<i64>, #csr>, #sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{rule 'block_dense' takes 3 params, got 2}}
func.func private @negative_rule_arity(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"block_dense", array<i64: 4, 4>, #csr>, #sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

#ell = #sparse_iter.layout<["compressed_varied", "compressed_fixed[2]"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{ell_bucket needs 0 <= p < P and 0 <= lo < hi, got (2, 2, 0, 2)}}
func.func private @negative_bucket_params(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"ell_bucket", array<i64: 2, 2, 0, 2>, #ell>, #sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{an ell_bucket part stores [compressed_varied, compressed_fixed[2]], got ['dense_fixed', 'compressed_varied']}}
func.func private @negative_bucket_layout(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"ell_bucket", array<i64: 0, 1, 1, 2>, #csr>, #sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{block_dense needs R, C > 0 and 0 < k <= R*C, got (4, 4, 17)}}
func.func private @negative_block_params(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"block_dense", array<i64: 4, 4, 17>, #csr>, #sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{a block_dense [4, 4, ...] part needs a 4x4 blocked layout}}
func.func private @negative_block_layout(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"block_dense", array<i64: 4, 4, 8>, #csr>, #sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

// expected-error@+1 {{a composable layout needs at least one part}}
func.func private @negative_no_parts(tensor<?x?xf32, #sparse_iter.composable<[]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#bsr = #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], affine_map<(i, j) -> (i floordiv 4, j floordiv 4, i mod 4, j mod 4)>, 32, 32, {}>
// expected-error@+1 {{the last part of a composable layout, and only it, must be 'rest'}}
func.func private @negative_no_rest(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"block_dense", array<i64: 4, 4, 8>, #bsr>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#vec = #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 32, 32, {}>
#bsr = #sparse_iter.layout<["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"], affine_map<(i, j) -> (i floordiv 4, j floordiv 4, i mod 4, j mod 4)>, 32, 32, {}>
// expected-error@+1 {{all parts must have the same rank, got [1, 2]}}
func.func private @negative_part_ranks(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<"block_dense", array<i64: 4, 4, 8>, #bsr>, #sparse_iter.part<"rest", array<i64>, #vec>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{composable parts must be #sparse_iter.part<...>, got #sparse_iter.layout}}
func.func private @negative_part_kind(tensor<?x?xf32, #sparse_iter.composable<[#csr]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// expected-error@+1 {{composable maps 2 dimensions but the tensor tensor<?xf32, }}
func.func private @negative_composable_rank(tensor<?xf32, #sparse_iter.composable<[#sparse_iter.part<"rest", array<i64>, #csr>]>>)

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
// A part outside a composable is still checked where it appears.
// expected-error@+1 {{rule 'rest' takes 0 params, got 1}}
func.func private @negative_loose_part() attributes {p = #sparse_iter.part<"rest", array<i64: 1>, #csr>}

// -----

// expected-error@+1 {{the soa property applies to singleton levels only: 'compressed_varied(soa)'}}
func.func private @negative_soa(tensor<?xf32, #sparse_iter.layout<["compressed_varied(soa)"], affine_map<(i) -> (i)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{the levels before structured level 2 must be dense_fixed}}
func.func private @negative_structured_after_compressed(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied", "structured[2,4]"], affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 32, {}>>)

// -----

// expected-error@+1 {{structured levels take no properties: 'structured[2,4](nonordered)'}}
func.func private @negative_structured_props(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "dense_fixed", "structured[2,4](nonordered)"], affine_map<(i, j) -> (i, j floordiv 4, j mod 4)>, 32, 32, {}>>)
