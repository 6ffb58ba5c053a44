// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-decompose-formats

// expected-error@+1 {{sparse-iter-decompose-formats: 'sparse_iter.decompose': unknown layout 'hyb:x'}}
func.func @bad_name(%a: tensor<?x?xf32> {sparse_iter.decompose = "hyb:x"}) {
  return
}

// -----

// expected-error@+1 {{'sparse_iter.decompose' takes a #sparse_iter.composable or #sparse_iter.layout attribute or a layout name, not 3 : i64}}
func.func @not_a_layout(%a: tensor<?x?xf32> {sparse_iter.decompose = 3}) {
  return
}

// -----

// An argument whose type another shares without its rule takes it alone only
// where its uses take any encoding; a return does not.
// expected-error@+1 {{'sparse_iter.decompose' on an argument whose type tensor<?x?xf32> other arguments share without the same rule}}
func.func @shared_type(%a: tensor<?x?xf32> {sparse_iter.decompose = "csr"}, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  return %a : tensor<?x?xf32>
}

// -----

// expected-error@+1 {{other arguments share without the same rule}}
func.func @shared_type_other_rule(%a: tensor<?x?xf32> {sparse_iter.decompose = "csr"},
                                  %b: tensor<?x?xf32> {sparse_iter.decompose = "csc"},
                                  %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%b, %b : tensor<?x?xf32>, tensor<?x?xf32>)
                     outs(%a : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// expected-error@+1 {{'sparse_iter.decompose' on an argument of type index}}
func.func @not_a_tensor(%a: index {sparse_iter.decompose = "csr"}) {
  return
}

// -----

// expected-error@+1 {{'callee' is called by other functions}}
func.func @callee(%a: tensor<?x?xf32> {sparse_iter.decompose = "csr"}) {
  return
}
func.func @caller(%a: tensor<?x?xf32>) {
  call @callee(%a) : (tensor<?x?xf32>) -> ()
  return
}

// -----

// Like every sparsecomp pass it verifies sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

// A helper another function also calls cannot be retyped for one of them.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func private @shared_helper(%a: tensor<?x?xf32, #csr>) {
  return
}
// expected-error@+1 {{'first' passes its operands to 'shared_helper', which 'second' also calls}}
func.func @first(%a: tensor<?x?xf32, #csr> {sparse_iter.decompose = "csc"}) {
  call @shared_helper(%a) : (tensor<?x?xf32, #csr>) -> ()
  return
}
func.func @second(%a: tensor<?x?xf32, #csr>) {
  call @shared_helper(%a) : (tensor<?x?xf32, #csr>) -> ()
  return
}

// -----

// A rule of another rank than its argument's (a matrix layout for a rank-3
// tensor) is refused at the argument, not left for the verifier after the pass.
// expected-error@+1 {{'sparse_iter.decompose' = "hyb:1:2" does not fit an argument of rank 3: its composable maps 2 dimensions}}
func.func @wrong_rank(%a: tensor<?x?x?xf32> {sparse_iter.decompose = "hyb:1:2"}) {
  return
}
