// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics

// Every rule of #sparse_iter.layout, #sparse_iter.part and
// #sparse_iter.composable: syntax errors from the dialect's parsers, located
// at the offending token, and value rules (sparsecomp.formats.layout/levels/
// dimmap) checked after parsing. Each function is @negative_<rule>.

// expected-error@+1 {{unknown level format 'sparse'; expected dense, dense_varied, compressed, compressed_fixed, loose_compressed, singleton or structured[n, m]}}
func.func private @negative_level_name(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{level property 'nonunique' is given twice}}
func.func private @negative_level_property_twice(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed(nonunique, nonunique))}>>)

// -----

// expected-error@+1 {{level format 'compressed' takes no arguments, got 1}}
func.func private @negative_level_args(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed[4]), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{expected integer value}}
func.func private @negative_level_arg_int(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed_fixed[k]), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{unknown level property 'sorted'; expected nonunique, nonordered or soa}}
func.func private @negative_level_property(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed(sorted)), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{compressed_fixed width must be positive, got 0}}
func.func private @negative_ell_width(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed_fixed[0]), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{dense levels take no properties: 'dense(nonunique)'}}
func.func private @negative_dense_nonunique(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : dense(nonunique)), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{expected ':'}}
func.func private @negative_level_missing(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i)}>>)

// -----

// expected-error@+1 {{a layout needs at least one level}}
func.func private @negative_no_levels(tensor<f32, #sparse_iter.layout<{map = () -> (), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{posWidth must be 0, 8, 16, 32 or 64, got 31}}
func.func private @negative_pos_width(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 31, crdWidth = 32}>>)

// -----

// expected-error@+1 {{crdWidth must be 0, 8, 16, 32 or 64, got 128}}
func.func private @negative_crd_width(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 32, crdWidth = 128}>>)

// -----

// A negative width is reported as written (it was read as unsigned: 4294967295).
// expected-error@+1 {{crdWidth must be 0, 8, 16, 32 or 64, got -1}}
func.func private @negative_crd_width_signed(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), crdWidth = -1}>>)

// -----

// expected-error@+1 {{layout maps 2 dimensions but the tensor tensor<?xf32, }}
func.func private @negative_rank(tensor<?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{dimension d1 must appear once, or as 'd1 floordiv c' and 'd1 mod c' with the same c, in (d0, d1) -> (d0, d1, d1)}}
func.func private @negative_dim_twice(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : dense, j : compressed), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{dimension d1 must appear once, or as 'd1 floordiv c' and 'd1 mod c' with the same c}}
func.func private @negative_block_mismatch(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : compressed, j mod 8 : dense), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{d1 mod must come after d1 floordiv}}
func.func private @negative_mod_first(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j mod 4 : dense, j floordiv 4 : compressed), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{block size must be positive in 'd0 floordiv 0'}}
func.func private @negative_block_zero(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i floordiv 0 : dense, i mod 0 : compressed), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{unsupported level expression 'd0 + d1' in '(d0, d1) -> (d0 + d1 : compressed)'; expected 'd', 'd floordiv c' or 'd mod c'}}
func.func private @negative_map_expr(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i + j : compressed), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{expected '->'}}
func.func private @negative_map_symbols(tensor<?xf32, #sparse_iter.layout<{map = (i)[s] -> (i : compressed)}>>)

// -----

// expected-error@+1 {{singleton level 1 must follow a nonunique compressed, loose_compressed or singleton level}}
func.func private @negative_singleton_after_unique(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : singleton), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{structured level 1 must be the last level}}
func.func private @negative_structured_not_last(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (j floordiv 4 : dense, j mod 4 : structured[2, 4], i : dense), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{structured[2, 4] level needs 'd mod 4'}}
func.func private @negative_structured_map(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : structured[2, 4]), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{structured[n, m] needs 0 < n <= m, got [5, 4]}}
func.func private @negative_structured_nm(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[5, 4]), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{unknown nmMetadata 'bitmask'; expected one of indices, mma_sp_m16n8k16, mma_sp_m16n8k32}}
func.func private @negative_nm_metadata(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32, nmMetadata = bitmask}>>)

// -----

// expected-error@+1 {{nmMetadata 'mma_sp_m16n8k32' needs a structured[2, 4] last level}}
func.func private @negative_mma_not_24(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[1, 4]), posWidth = 32, crdWidth = 32, nmMetadata = mma_sp_m16n8k32}>>)

// -----

// expected-error@+1 {{nmMetadata 'mma_sp_m16n8k16' is 32-bit words: it needs crdWidth = 32, got none (64-bit)}}
func.func private @negative_mma_sp_wide_words(tensor<?x?xf16, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]), nmMetadata = mma_sp_m16n8k16}>>)

// -----

// expected-error@+1 {{nmMetadata needs a structured last level}}
func.func private @negative_nm_metadata_csr(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32, nmMetadata = indices}>>)

// -----

// expected-error@+1 {{indexGroup must be an identifier, got '1 2'}}
func.func private @negative_index_group(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 32, crdWidth = 32, indexGroup = "1 2"}>>)

// -----

// expected-error@+1 {{expected string}}
func.func private @negative_index_group_type(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 32, crdWidth = 32, indexGroup = 3}>>)

// -----

// expected-error@+1 {{unknown layout key 'padding'; expected map, posWidth, crdWidth, indexGroup or nmMetadata}}
func.func private @negative_option(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), padding = 0}>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{#sparse_iter.part is not a tensor encoding; use sparsity, encoding, layout, composable}}
func.func private @negative_part_as_encoding(tensor<?x?xf32, #sparse_iter.part<rest, #csr>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{unknown part rule 'diagonal'; expected one of ell_bucket, block_dense, rest}}
func.func private @negative_rule(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<diagonal, #csr>, #sparse_iter.part<rest, #csr>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{rule 'block_dense' takes 3 params, got 2}}
func.func private @negative_rule_arity(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<block_dense[4, 4], #csr>, #sparse_iter.part<rest, #csr>]>>)

// -----

#ell = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed_fixed[2]), posWidth = 32, crdWidth = 32}>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{ell_bucket needs 0 <= p < P and 0 <= lo < hi, got (2, 2, 0, 2)}}
func.func private @negative_bucket_params(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<ell_bucket[2, 2, 0, 2], #ell>, #sparse_iter.part<rest, #csr>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{an ell_bucket part stores [compressed, compressed_fixed[2]], got ['dense', 'compressed']}}
func.func private @negative_bucket_layout(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 1, 1, 2], #csr>, #sparse_iter.part<rest, #csr>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{block_dense needs R, C > 0 and 0 < k <= R*C, got (4, 4, 17)}}
func.func private @negative_block_params(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<block_dense[4, 4, 17], #csr>, #sparse_iter.part<rest, #csr>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{a block_dense[4, 4, ...] part needs a 4x4 blocked layout}}
func.func private @negative_block_layout(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<block_dense[4, 4, 8], #csr>, #sparse_iter.part<rest, #csr>]>>)

// -----

// expected-error@+1 {{a composable layout needs at least one part}}
func.func private @negative_no_parts(tensor<?x?xf32, #sparse_iter.composable<[]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{the last part of a composable layout, and only it, must be 'rest'}}
func.func private @negative_no_rest(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<block_dense[4, 4, 8], #bsr>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#vec = #sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 32, crdWidth = 32}>
#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, i mod 4 : dense, j mod 4 : dense), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{all parts must have the same rank, got [1, 2]}}
func.func private @negative_part_ranks(tensor<?x?xf32, #sparse_iter.composable<[#sparse_iter.part<block_dense[4, 4, 8], #bsr>, #sparse_iter.part<rest, #vec>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{composable parts must be #sparse_iter.part<...>, got #sparse_iter.layout}}
func.func private @negative_part_kind(tensor<?x?xf32, #sparse_iter.composable<[#csr]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// expected-error@+1 {{composable maps 2 dimensions but the tensor tensor<?xf32, }}
func.func private @negative_composable_rank(tensor<?xf32, #sparse_iter.composable<[#sparse_iter.part<rest, #csr>]>>)

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
// A part outside a composable is still checked where it appears.
// expected-error@+1 {{rule 'rest' takes 0 params, got 1}}
func.func private @negative_loose_part() attributes {p = #sparse_iter.part<rest[1], #csr>}

// -----

// expected-error@+1 {{the soa property applies to singleton levels only: 'compressed(soa)'}}
func.func private @negative_soa(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed(soa)), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{the levels before structured level 2 must be dense}}
func.func private @negative_structured_after_compressed(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : compressed, j mod 4 : structured[2, 4]), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{structured levels take no properties: 'structured[2, 4](nonordered)'}}
func.func private @negative_structured_props(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4](nonordered)), posWidth = 32, crdWidth = 32}>>)

// -----

// expected-error@+1 {{layout key 'crdWidth' is given twice}}
func.func private @negative_key_twice(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : compressed), crdWidth = 32, crdWidth = 8}>>)

// -----

// expected-error@+1 {{a layout needs 'map = (dims) -> (levels)'}}
func.func private @negative_no_map(tensor<?xf32, #sparse_iter.layout<{posWidth = 32}>>)

// -----

// expected-error@+1 {{dimension 'i' is named twice}}
func.func private @negative_dim_named_twice(tensor<?x?xf32, #sparse_iter.layout<{map = (i, i) -> (i : dense, i : compressed)}>>)

// -----

// expected-error@+1 {{use of undeclared identifier}}
func.func private @negative_undeclared_dim(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, k : compressed)}>>)

// -----

// expected-error@+1 {{level format 'structured' takes two arguments [n, m], got 1}}
func.func private @negative_structured_arity(tensor<?x?xf32, #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2])}>>)

// -----

// The positional form of earlier releases gets the form to write instead.
// expected-error@+1 {{the positional layout form '[levels], map, widths' is no longer read; write #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>}}
func.func private @negative_positional_form(tensor<?x?xf32, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>)
