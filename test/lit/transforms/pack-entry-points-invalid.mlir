// RUN: sparsecomp-opt %s --verify-diagnostics --sparse-iter-pack-entry-points

// The packed form's name is taken by a function of the program's own.
module {
  llvm.func @_mlir_ciface_f(%a: !llvm.ptr) attributes {sparse_iter.abi = "{}"} {
    llvm.return
  }
  // expected-error@+1 {{sparse-iter-pack-entry-points: '@_sparsecomp_packed_f' is the name of the packed form of '@_mlir_ciface_f'; rename this symbol}}
  llvm.func @_sparsecomp_packed_f(%a: !llvm.ptr) {
    llvm.return
  }
}
