// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-check-translatable

// Like every sparsecomp pass it verifies sparse_iter input first.
// expected-error@+1 {{unknown level format 'sparse'}}
func.func private @negative_bad_layout(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : sparse), posWidth = 32, crdWidth = 32}>>)

// -----

// An op no conversion lowered, between the casts the conversions around it
// left: the op is named, not the casts.
llvm.func @leftover(%d: !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>) {
  %m = builtin.unrealized_conversion_cast %d : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<?xf32>
  // expected-error@+1 {{'memref.dealloc' was not lowered to the LLVM dialect: no stage of the pipeline lowers it (docs/coverage.md lists what sparsecomp compiles)}}
  memref.dealloc %m : memref<?xf32>
  llvm.return
}

// -----

// An aggregate op reached the LLVM stage: the pipeline that decomposes it was
// skipped.
llvm.func @aggregate(%d: !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>) {
  %x = builtin.unrealized_conversion_cast %d : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<4x8xf32>
  %o = builtin.unrealized_conversion_cast %d : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<4x8xf32>
  // expected-error@+1 {{'linalg.softmax' was not lowered to the LLVM dialect: aggregate ops are decomposed by sparse-iter-decompose-aggregates, which sparsecomp-cpu-layouts runs first; lower the program with the whole sparsecomp-cpu pipeline}}
  linalg.softmax dimension(1) ins(%x : memref<4x8xf32>) outs(%o : memref<4x8xf32>)
  llvm.return
}

// -----

// Only a cast is left: a value of a type no conversion took.
llvm.func @cast_only(%n: i64) -> i64 {
  // expected-error@+1 {{'builtin.unrealized_conversion_cast' from (i64) to (index) was left by the lowering to the LLVM dialect: no conversion took a value of this type}}
  %i = builtin.unrealized_conversion_cast %n : i64 to index
  %back = builtin.unrealized_conversion_cast %i : index to i64
  llvm.return %back : i64
}

// -----

// A function no conversion took: named once, not each op in it.
// expected-error@+1 {{'func.func' was not lowered to the LLVM dialect}}
func.func @not_lowered() {
  %c = arith.constant 0 : index
  return
}
