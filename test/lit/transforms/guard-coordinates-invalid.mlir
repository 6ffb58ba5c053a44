// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-guard-coordinates

// expected-error@+1 {{sparse-iter-guard-coordinates: 'sparse_iter.guard' names argument 1, which is not sparse}}
func.func @not_sparse(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index, %x: memref<?xf32>) attributes {sparse_iter.guard = array<i64: 1>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s1\"]}],\"results\":[]}"} {
  return
}

// -----

// expected-error@+1 {{sparse-iter-guard-coordinates: 'sparse_iter.guard': argument 0 is not in a csr or csc layout}}
func.func @not_csr(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index) attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton)}>\",\"buffers\":[[\"pos0\",\"int32\"],[\"crd0\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]}],\"results\":[]}"} {
  return
}

// -----

// expected-error@+1 {{sparse-iter-guard-coordinates: 'sparse_iter.guard' needs a public function of one block with an ABI}}
func.func @no_abi(%crd: memref<?xi32>) attributes {sparse_iter.guard = array<i64: 0>} {
  return
}
