// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-lower-iterations

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @named_op(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{'linalg.matvec' on sparse tensors must be generalized first (run linalg-generalize-named-ops before sparse-iter-lower-iterations)}}
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @sparse_plus_dense(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{cannot lower this linalg.generic: the body does not vanish where the sparse operand is zero (e.g. sparse + dense); iterating only stored entries would be wrong}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

func.func @two_structures(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csc>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{cannot lower this linalg.generic: co-iteration over sparse operands with different index structures (give both the same layout and map with an index_group to share it); row by row: an elementwise kernel over differently structured operands reads each one row by row, in the output's (i, j) order (convert column-major operands to CSR)}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csc>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

func.func @new_structure(%A: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32, #csc>) -> tensor<?x?xf32, #csc> {
  // expected-error@+1 {{cannot lower this linalg.generic: a sparse output with the structure of a sparse input must have its type and indexing map; row by row: a computed sparse output must be stored by rows (CSR), not csc}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32, #csc>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<?x?xf32, #csc>
  return %r : tensor<?x?xf32, #csc>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @sparse_init(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{a sparse output's init must be tensor.empty or the sparse input}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%B : tensor<?x?xf32, #csr>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @only_output_sparse(%A: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %A, %c0 : tensor<?x?xf32>
  %e = tensor.empty(%d, %d) : tensor<?x?xf32, #csr>
  // expected-error@+1 {{only the output is sparse; a sparse input must drive the iteration}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32>) outs(%e : tensor<?x?xf32, #csr>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @two_outputs(%A: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32>, %D: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{ops with 2 outputs are not supported (one output)}}
  %r:2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%C, %D : tensor<?x?xf32>, tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32, %p: f32):
    linalg.yield %a, %a : f32, f32
  } -> (tensor<?x?xf32>, tensor<?x?xf32>)
  return %r#0 : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @diagonal_access(%A: tensor<?x?xf32, #csr>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{cannot lower this linalg.generic: the sparse operand's indexing map (d0) -> (d0, d0) must be a projected permutation}}
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i, i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#hyb = #sparse_iter.composable<[#sparse_iter.part<rest, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>]>

// Each part would overwrite the output the earlier parts computed.
func.func @composable_overwrite(%A: tensor<?x?xf32, #hyb>, %D: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{cannot lower this linalg.generic: a composable operand is lowered part by part, which needs the body to accumulate into the output (out + f(a, ...), f not reading out); convert it to one layout first}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32, #hyb>) outs(%D : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

// SpGEMM walks B's rows: a column-major B is refused (the upstream fallback takes it).
func.func @spgemm_csc_factor(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csc>, %d0: index, %d1: index) -> tensor<?x?xf32, #csr> {
  %C = tensor.empty(%d0, %d1) : tensor<?x?xf32, #csr>
  // expected-error@+1 {{row by row: a row-wise product needs A[i, k] and B[k, j] stored by rows (a column-major operand must be converted to CSR first)}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csc>) outs(%C : tensor<?x?xf32, #csr>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// A computed sparse output starts empty: a sparse init that is not tensor.empty is refused.
func.func @spgemm_into_argument(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{row by row: a computed sparse output's init must be tensor.empty}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32, #csr>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @ranking_sparsifier(%x: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{cannot lower this sparse_iter.sparsify: the 'nm' sparsifier needs the whole tensor; only keep_all and threshold are fused into a kernel (use sparsecomp.sparsify on the host)}}
  %s = "sparse_iter.sparsify"(%x) {sparsifier = #sparse_iter.sparsifier<nm[2, 4]>}
      : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  return %s : tensor<?x?xf32, #csr>
}

// -----

#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

func.func @sparsify_to_csc(%x: tensor<?x?xf32>) -> tensor<?x?xf32, #csc> {
  // expected-error-re@+1 {{cannot lower this sparse_iter.sparsify: sparsify lowers to a CSR result (dense, compressed), not {{.*}}}}
  %s = "sparse_iter.sparsify"(%x) {sparsifier = #sparse_iter.sparsifier<threshold[0.5]>}
      : (tensor<?x?xf32>) -> tensor<?x?xf32, #csc>
  return %s : tensor<?x?xf32, #csc>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#ell = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed_fixed), posWidth = 32, crdWidth = 32}>

func.func @convert_to_ell(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #ell> {
  // expected-error@+1 {{cannot lower this sparse_iter.set_encoding: conversions produce [dense, compressed] layouts (CSR, CSC) or dense tensors, not ell}}
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #ell>
  return %r : tensor<?x?xf32, #ell>
}

// -----

#coo = #sparse_iter.layout<{map = (i, j) -> (i : compressed(nonunique), j : singleton(nonunique)), posWidth = 32, crdWidth = 32}>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @convert_duplicates(%A: tensor<?x?xf32, #coo>) -> tensor<?x?xf32, #csr> {
  // expected-error@+1 {{cannot lower this sparse_iter.set_encoding: converting a source that may repeat coordinates (its last level is nonunique) to a sparse layout is not supported}}
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #coo>) -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#dcsr_any = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed(nonordered)), posWidth = 32, crdWidth = 32}>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @convert_unordered(%A: tensor<?x?xf32, #dcsr_any>) -> tensor<?x?xf32, #csr> {
  // expected-error-re@+1 {{cannot lower this sparse_iter.set_encoding: the source {{.*}} does not give each row of the target its coordinates in order (give the target's inner level 'nonordered')}}
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #dcsr_any>) -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#hyb = #sparse_iter.composable<[#sparse_iter.part<rest, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>]>

func.func @convert_composable(%A: tensor<?x?xf32, #hyb>) -> tensor<?x?xf32> {
  // expected-error@+1 {{cannot lower this sparse_iter.unset_encoding: converting a composable tensor is not supported; convert its parts}}
  %r = "sparse_iter.unset_encoding"(%A) : (tensor<?x?xf32, #hyb>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#sparse = #sparse_iter.sparsity<unstructured, density = 0.01>
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @convert_unresolved(%A: tensor<?x?xf32, #sparse>) -> tensor<?x?xf32, #csr> {
  // expected-error-re@+1 {{cannot lower this sparse_iter.set_encoding: the source's encoding {{.*}}sparsity{{.*}} is not a layout}}
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #sparse>) -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csr3 = #sparse_iter.layout<{map = (b, i, j) -> (b : dense, i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @convert_batched(%A: tensor<?x?x?xf32>) -> tensor<?x?x?xf32, #csr3> {
  // expected-error-re@+1 {{cannot lower this sparse_iter.set_encoding: conversions produce 2-D CSR or CSC layouts or dense tensors, not {{.*}}}}
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32, #csr3>
  return %r : tensor<?x?x?xf32, #csr3>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#multi = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed(nonunique)), posWidth = 32, crdWidth = 32}>

func.func @convert_to_nonunique(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #multi> {
  // expected-error@+1 {{cannot lower this sparse_iter.set_encoding: a conversion cannot produce a nonunique level}}
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #multi>
  return %r : tensor<?x?xf32, #multi>
}

// -----

// A body that yields zero where A is zero (here y * a) and reduces over A's
// columns: a skipped zero would have reset y[i], so stored entries alone
// cannot give the result (the op goes to the upstream sparsifier instead).
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

func.func @negative_overwrite_in_reduction(%A: tensor<?x?xf32, #csr>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{cannot lower this linalg.generic: the body overwrites the output (it yields zero where the sparse operand is zero) in a reduction over the sparse operand; skipping its zeros would be wrong; row by row: row-wise kernels write a 2-D output indexed by plain loop dimensions}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %o, %a : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
