// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-lower-iterations

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

func.func @named_op(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{'linalg.matvec' on sparse tensors must be generalized first (run linalg-generalize-named-ops before sparse-iter-lower-iterations)}}
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

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

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

func.func @two_structures(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{co-iteration over sparse operands with different index structures (give both the same layout and map with an index_group to share it)}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>
#csc = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (j, i)>, 32, 32, {}>

func.func @new_structure(%A: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32, #csc>) -> tensor<?x?xf32, #csc> {
  // expected-error@+1 {{a sparse output must have the sparse input's type and indexing map (outputs with a new sparsity structure are not supported yet)}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32, #csc>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<?x?xf32, #csc>
  return %r : tensor<?x?xf32, #csc>
}

// -----

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

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

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

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

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

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

#csr = #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>

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

#hyb = #sparse_iter.composable<[#sparse_iter.part<"rest", array<i64>, #sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>, 32, 32, {}>>]>

func.func @composable(%A: tensor<?x?xf32, #hyb>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{composable layouts are lowered part by part; not yet supported here}}
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A : tensor<?x?xf32, #hyb>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
