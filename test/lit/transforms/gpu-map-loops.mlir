// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-map-loops | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-map-loops='rows-per-block=256 column-lanes=64 rows-per-column-block=2' | FileCheck %s --check-prefix=SIZES
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-gpu-map-loops='balance=nonzeros' | FileCheck %s --check-prefix=SPLIT --enable-var-scope

// SIZES-LABEL: func.func @rows
// SIZES: arith.constant 256 : index
// SIZES-LABEL: func.func @columns
// SIZES-DAG: arith.constant 64 : index
// SIZES-DAG: arith.constant 2 : index

// A row loop: one row per thread, 128 threads per block, a guard at the end.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// CHECK: %[[C128:.*]] = arith.constant 128 : index
// CHECK: %[[GRID:.*]] = arith.ceildivsi %{{.*}}, %[[C128]] : index
// CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[GRID]])
// CHECK: scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[C128]])
// CHECK: %[[ROW:.*]] = arith.addi %{{.*}}, %[[T]]
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[ROW]]
// CHECK: scf.if %[[IN]]
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: processor = thread_x
// CHECK: processor = block_x
func.func @rows(%y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    memref.store %one, %y[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// A row loop whose body is a loop over independent output columns (SpMM):
// columns on the lanes (thread_x, 32), rows on thread_y (4). The guard is on
// the row; a lane past the last column reads the last one (its column clamped)
// and skips its stores, so that a warp's lanes stay together. Blocks are on
// one grid dimension (y stops at 65535, fewer than a big matrix's row blocks):
// the column tile is the block's index mod the tiles, the row block the quotient.
// CHECK-LABEL: func.func @columns
// CHECK-SAME: (%[[C:.*]]: memref<?x?xf32>, %[[B:.*]]: memref<?x?xf32>, %[[M:.*]]: index, %[[N:.*]]: index)
// CHECK: %[[NB:.*]] = arith.ceildivsi %{{.*}}, %c32
// CHECK: %[[MB:.*]] = arith.ceildivsi %{{.*}}, %c4
// CHECK: %[[ALL:.*]] = arith.muli %[[NB]], %[[MB]]
// CHECK: scf.parallel (%[[BLOCK:.*]]) = (%{{.*}}) to (%[[ALL]])
// CHECK: %[[BJ:.*]] = arith.remui %[[BLOCK]], %[[NB]]
// CHECK: %[[BI:.*]] = arith.divui %[[BLOCK]], %[[NB]]
// CHECK: scf.parallel (%[[TJ:.*]], %[[TI:.*]]) = (%{{.*}}, %{{.*}}) to (%[[C32:.*]], %[[C4:.*]])
// CHECK: %[[J:.*]] = arith.addi %{{.*}}, %[[TJ]]
// CHECK: %[[I:.*]] = arith.addi %{{.*}}, %[[TI]]
// CHECK-NOT: arith.andi
// CHECK: scf.if
// CHECK: %[[LAST:.*]] = arith.minsi %[[J]], %{{.*}}
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[J]], %{{.*}}
// CHECK: memref.load %[[B]][%{{.*}}, %{{.*}}]
// CHECK: scf.if %[[IN]]
// CHECK-NEXT: memref.store %{{.*}}, %[[C]][%{{.*}}, %{{.*}}]
// CHECK: processor = thread_x{{.*}}processor = thread_y
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x, {{[^]]*}}>]}
func.func @columns(%c: memref<?x?xf32>, %b: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %j = %c0 to %n step %c1 {
      %v = memref.load %b[%i, %j] : memref<?x?xf32>
      %o = memref.load %c[%i, %j] : memref<?x?xf32>
      %s = arith.addf %v, %o : f32
      memref.store %s, %c[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Columns that are not independent (each iteration reads its left
// neighbour's output) stay a loop inside the row's thread.
// CHECK-LABEL: func.func @prefix
// CHECK: scf.parallel (%{{.*}}) =
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%c128)
// CHECK: scf.for
func.func @prefix(%c: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %j = %c1 to %n step %c1 {
      %l = arith.subi %j, %c1 : index
      %v = memref.load %c[%i, %l] : memref<?x?xf32>
      memref.store %v, %c[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A row whose body sums over its entries (SpMV): 8 lanes per row and 16 rows
// per block; lane l takes entries lo + l, lo + l + 8, ... from zero; rows
// past the end read row 0's bounds and iterate nothing; a xor butterfly
// (4, 2, 1) adds the lanes' sums, and lane 0 adds the initial value and
// stores.
// CHECK-LABEL: func.func @row_sums
// CHECK-SAME: (%[[POS:.*]]: memref<?xindex>, %[[VAL:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// CHECK: scf.parallel (%[[B:.*]]) =
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: scf.parallel (%[[L:.*]], %[[R:.*]]) = (%{{.*}}, %{{.*}}) to (%[[C8]], %[[C16]])
// CHECK: %[[IN:.*]] = arith.cmpi slt
// CHECK: %[[ROW:.*]] = arith.select %[[IN]]
// CHECK: %[[LO:.*]] = memref.load %[[POS]]
// CHECK: %[[HI:.*]] = memref.load %[[POS]]
// CHECK: %[[FIRST:.*]] = arith.addi %[[LO]], %{{.*}}
// CHECK: %[[STOP:.*]] = arith.select %[[IN]], %[[HI]], %[[LO]]
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} = %[[FIRST]] to %[[STOP]] step %{{.*}} iter_args(%{{.*}} = %cst{{.*}})
// CHECK: gpu.shuffle  xor %[[SUM]], %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: %[[LANE0:.*]] = arith.cmpi eq, %[[L]]
// CHECK: %[[STORE:.*]] = arith.andi %[[IN]], %[[LANE0]]
// CHECK: scf.if %[[STORE]]
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: processor = thread_x{{.*}}processor = thread_y
func.func @row_sums(%pos: memref<?xindex>, %val: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %val[%p] : memref<?xf32>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// The row's sum used inside a region after the loop (a guarded store): the
// use inside the region reads the shuffled total too, not the lane's part.
// CHECK-LABEL: func.func @row_sums_nested_use
// CHECK: %[[PART:.*]] = scf.for
// CHECK: gpu.shuffle  xor %[[PART]]
// CHECK: gpu.shuffle  xor
// CHECK: %[[SH:.*]], %{{.*}} = gpu.shuffle  xor
// CHECK: %[[LAST:.*]] = arith.addf %{{.*}}, %[[SH]] : f32
// CHECK: scf.if
// CHECK: %[[TOTAL:.*]] = arith.addf %{{.*}}, %[[LAST]] : f32
// CHECK: scf.if
// CHECK-NEXT: memref.store %[[TOTAL]]
func.func @row_sums_nested_use(%pos: memref<?xindex>, %val: memref<?xf32>, %y: memref<?xf32>, %m: index, %flag: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %val[%p] : memref<?xf32>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    scf.if %flag {
      memref.store %s, %y[%i] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// An ELL bucket of width 4 (SpMV over a hyb part): the sum loop has a constant
// trip count and adds only where the slot holds an entry (coordinate >= 0).
// 4 lanes per row, one slot each, 32 rows per block; a butterfly of 2, 1.
// CHECK-LABEL: func.func @ell_bucket_rows
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c4{{[_0-9]*}}, %c32{{[_0-9]*}})
// CHECK: %[[SUM:.*]] = scf.for
// CHECK: scf.if
// CHECK: gpu.shuffle  xor %[[SUM]], %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK: memref.store
func.func @ell_bucket_rows(%crd: memref<?xindex>, %val: memref<?xf32>, %x: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %init = memref.load %y[%i] : memref<?xf32>
    %base = arith.muli %i, %c4 : index
    %s = scf.for %k = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (f32) {
      %p = arith.addi %base, %k : index
      %j = memref.load %crd[%p] : memref<?xindex>
      %stored = arith.cmpi sge, %j, %c0 : index
      %n = scf.if %stored -> (f32) {
        %v = memref.load %val[%p] : memref<?xf32>
        %xv = memref.load %x[%j] : memref<?xf32>
        %t = arith.mulf %v, %xv : f32
        %a = arith.addf %acc, %t : f32
        scf.yield %a : f32
      } else {
        scf.yield %acc : f32
      }
      scf.yield %n : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// hyb's rest: every row holds more than 32 entries
// (sparse_iter.min_row_entries = 33), so a whole warp shares a row: 32 lanes,
// 4 rows per block, a butterfly of 16 .. 1.
// CHECK-LABEL: func.func @long_rows
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c32{{[_0-9]*}}, %c4{{[_0-9]*}})
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
func.func @long_rows(%pos: memref<?xindex>, %val: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %val[%p] : memref<?xf32>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
    scf.reduce
  } {sparse_iter.min_row_entries = 33 : i64}
  return
}

// -----

// The lane's partial sum feeds something besides the sum (a max): lanes would
// each see only their part, so the row stays on one thread.
// CHECK-LABEL: func.func @partial_sum_escapes
// CHECK-NOT: gpu.shuffle
// CHECK: processor = thread_x
func.func @partial_sum_escapes(%pos: memref<?xindex>, %val: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %val[%p] : memref<?xf32>
      %big = arith.cmpf ogt, %acc, %v : f32
      %n = scf.if %big -> (f32) {
        scf.yield %acc : f32
      } else {
        %a = arith.addf %acc, %v : f32
        scf.yield %a : f32
      }
      scf.yield %n : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// SDDMM: each entry of the row sums a dense dot product, then stores it. A
// warp per row (32 lanes x 4 rows per block) walks the row's entries 4 at a
// time (rows past the end walk none): group g = lane / 8 takes entry p + g
// (entry p where that is past the row), lane l % 8 of the group takes
// k = l % 8, + 8, ..., a butterfly (4 .. 1) adds the group's sums, and the
// group's lane 0 stores where its entry exists.
// CHECK-LABEL: func.func @entry_dots
// CHECK-SAME: (%[[POS:.*]]: memref<?xindex>, %[[CRD:.*]]: memref<?xindex>, %[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?x?xf32>, %[[OUT:.*]]: memref<?xf32>, %[[M:.*]]: index, %[[K:.*]]: index)
// CHECK: scf.parallel (%[[L:.*]], %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c32{{[_0-9]*}}, %c4{{[_0-9]*}})
// CHECK: %[[IN:.*]] = arith.cmpi slt
// CHECK: %[[LO:.*]] = memref.load %[[POS]]
// CHECK: %[[HI:.*]] = memref.load %[[POS]]
// CHECK: %[[STOP:.*]] = arith.select %[[IN]], %[[HI]], %[[LO]]
// CHECK: %[[STEP:.*]] = arith.muli %c1, %c4
// CHECK: %[[GROUP:.*]] = arith.divui %[[L]], %c8
// CHECK: %[[MEMBER:.*]] = arith.remui %[[L]], %c8
// CHECK: scf.for %[[P:.*]] = %[[LO]] to %[[STOP]] step %[[STEP]]
// CHECK: %[[OFF:.*]] = arith.muli %[[GROUP]], %c1
// CHECK: %[[OWN:.*]] = arith.addi %[[P]], %[[OFF]]
// CHECK: %[[THERE:.*]] = arith.cmpi slt, %[[OWN]], %[[STOP]]
// CHECK: %[[E:.*]] = arith.select %[[THERE]], %[[OWN]], %[[P]]
// CHECK: memref.load %[[CRD]][%[[E]]]
// Each lane's share, four elements a load where the rows allow it (whole
// aligned vectors: checked at run time), else one element a load.
// CHECK: %[[FIRST:.*]] = arith.addi %{{.*}}, %{{.*}}
// CHECK: %[[STRIDE:.*]] = arith.muli %{{.*}}, %c8
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK: %[[SUM:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK: %[[WIDE:.*]] = scf.for %[[KV:.*]] = %{{.*}} to %[[K]] step %c32{{[_0-9]*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<4xf32>)
// CHECK: vector.load %[[X]][%{{.*}}, %[[KV]]] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// CHECK: vector.load %[[Y]][%{{.*}}, %[[KV]]] {alignment = 16 : i64} : memref<?x?xf32>, vector<4xf32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: vector.reduction <add>, %[[WIDE]] : vector<4xf32> into f32
// CHECK: } else {
// CHECK: %[[NARROW:.*]] = scf.for %{{.*}} = %[[FIRST]] to %[[K]] step %[[STRIDE]]
// CHECK: scf.yield %[[NARROW]] : f32
// CHECK: gpu.shuffle  xor %[[SUM]], %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK-NOT: gpu.shuffle
// CHECK: %[[LEAD:.*]] = arith.cmpi eq, %[[MEMBER]]
// CHECK: %[[STORES:.*]] = arith.andi %[[LEAD]], %[[THERE]]
// CHECK: scf.if %[[STORES]]
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[E]]]
func.func @entry_dots(%pos: memref<?xindex>, %crd: memref<?xindex>, %x: memref<?x?xf32>, %y: memref<?x?xf32>, %out: memref<?xf32>, %m: index, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    scf.for %p = %lo to %hi step %c1 {
      %j = memref.load %crd[%p] : memref<?xindex>
      %init = memref.load %out[%p] : memref<?xf32>
      %s = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %init) -> (f32) {
        %xv = memref.load %x[%i, %kk] : memref<?x?xf32>
        %yv = memref.load %y[%j, %kk] : memref<?x?xf32>
        %t = arith.mulf %xv, %yv : f32
        %a = arith.addf %acc, %t : f32
        scf.yield %a : f32
      }
      memref.store %s, %out[%p] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A lane's sum whose loads are not at [..., k] (here k + 1) keeps one element a
// load: no vector twin.
// CHECK-LABEL: func.func @entry_dots_shifted
// CHECK-NOT: vector.load
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
func.func @entry_dots_shifted(%pos: memref<?xindex>, %crd: memref<?xindex>, %x: memref<?x?xf32>, %y: memref<?x?xf32>, %out: memref<?xf32>, %m: index, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    scf.for %p = %lo to %hi step %c1 {
      %j = memref.load %crd[%p] : memref<?xindex>
      %init = memref.load %out[%p] : memref<?xf32>
      %s = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %init) -> (f32) {
        %k1 = arith.addi %kk, %c1 : index
        %xv = memref.load %x[%i, %k1] : memref<?x?xf32>
        %yv = memref.load %y[%j, %kk] : memref<?x?xf32>
        %t = arith.mulf %xv, %yv : f32
        %a = arith.addf %acc, %t : f32
        scf.yield %a : f32
      }
      memref.store %s, %out[%p] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// balance=nonzeros on SDDMM's form: warp w (4 a block, as many as rows) takes
// entries [w E, w E + E), E = ceil(pos[m] / warps), finds the rows of its
// first and last entries by halving, and walks its entries 4 at a time as by
// rows, each group of 8 lanes finding its entry's row by halving between
// those two and reading x at that row; each entry is stored once (no atomics).
// SPLIT-LABEL: func.func @entry_dots_balanced
// SPLIT-SAME: (%[[POS:.*]]: memref<?xindex>, %[[CRD:.*]]: memref<?xindex>, %[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?x?xf32>, %[[OUT:.*]]: memref<?xf32>, %[[M:.*]]: index, %[[K:.*]]: index)
// SPLIT: %[[BLOCKS:.*]] = arith.ceildivsi %[[M]], %c4
// SPLIT: %[[WARPS:.*]] = arith.muli %[[BLOCKS]], %c4
// SPLIT: scf.parallel (%[[L:.*]], %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c32{{[_0-9]*}}, %c4{{[_0-9]*}})
// SPLIT: %[[NNZ:.*]] = memref.load %[[POS]][%[[M]]]
// SPLIT: %[[E:.*]] = arith.ceildivui %[[NNZ]], %[[WARPS]]
// SPLIT: %[[BEGIN:.*]] = arith.minui %{{.*}}, %[[NNZ]]
// SPLIT: %[[END:.*]] = arith.minui %{{.*}}, %[[NNZ]]
// SPLIT: %[[LOW:.*]]:2 = scf.while
// SPLIT: %[[HIGH:.*]]:2 = scf.while
// SPLIT: %[[TOP:.*]] = arith.addi %[[HIGH]]#0, %c1
// SPLIT: scf.for %[[P:.*]] = %[[BEGIN]] to %[[END]] step %c4
// SPLIT: %[[OWN:.*]] = arith.addi %[[P]], %{{.*}}
// SPLIT: %[[THERE:.*]] = arith.cmpi ult, %[[OWN]], %[[END]]
// SPLIT: %[[ENTRY:.*]] = arith.select %[[THERE]], %[[OWN]], %[[P]]
// SPLIT: %[[ROW:.*]]:2 = scf.while (%{{.*}} = %[[LOW]]#0, %{{.*}} = %[[TOP]])
// SPLIT: memref.load %[[CRD]][%[[ENTRY]]]
// SPLIT: vector.load %[[X]][%[[ROW]]#0, %{{.*}}]
// SPLIT: gpu.shuffle  xor
// SPLIT-NOT: memref.atomic_rmw
// SPLIT: memref.store %{{.*}}, %[[OUT]][%[[ENTRY]]]
func.func @entry_dots_balanced(%pos: memref<?xindex>, %crd: memref<?xindex>, %x: memref<?x?xf32>, %y: memref<?x?xf32>, %out: memref<?xf32>, %m: index, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %lo = memref.load %pos[%i] : memref<?xindex>
    %i1 = arith.addi %i, %c1 : index
    %hi = memref.load %pos[%i1] : memref<?xindex>
    scf.for %p = %lo to %hi step %c1 {
      %j = memref.load %crd[%p] : memref<?xindex>
      %init = memref.load %out[%p] : memref<?xf32>
      %s = scf.for %kk = %c0 to %k step %c1 iter_args(%acc = %init) -> (f32) {
        %xv = memref.load %x[%i, %kk] : memref<?x?xf32>
        %yv = memref.load %y[%j, %kk] : memref<?x?xf32>
        %t = arith.mulf %xv, %yv : f32
        %a = arith.addf %acc, %t : f32
        scf.yield %a : f32
      }
      memref.store %s, %out[%p] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// balance=nonzeros: SpMV's entries shared out evenly. A zero fill of y first
// (its own launch), then 128 threads a block, ceil(m / 128) blocks: thread t
// takes entries [t E, t E + E), E = ceil(pos[m] / threads), finds its first
// row by halving [0, m), walks its entries, and adds each row's part into y
// atomically where the next entry starts another row (past empty ones), and
// its last part after the walk.
// SPLIT-LABEL: func.func @csr_spmv
// SPLIT-SAME: (%[[POS:.*]]: memref<?xi32>, %[[CRD:.*]]: memref<?xi32>, %[[VAL:.*]]: memref<?xf32>, %[[X:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>, %[[M:.*]]: index)
// SPLIT: memref.store %{{.*}}, %[[Y]][%{{.*}}] : memref<?xf32>
// SPLIT: mapping = [#gpu.loop_dim_map<processor = thread_x
// SPLIT: mapping = [#gpu.loop_dim_map<processor = block_x
// SPLIT: %[[BLOCKS:.*]] = arith.ceildivsi %[[M]], %c128
// SPLIT: %[[THREADS:.*]] = arith.muli %[[BLOCKS]], %c128
// SPLIT: %[[NNZ32:.*]] = memref.load %[[POS]][%[[M]]]
// SPLIT: %[[NNZ:.*]] = arith.index_castui %[[NNZ32]]
// SPLIT: %[[E:.*]] = arith.ceildivui %[[NNZ]], %[[THREADS]]
// SPLIT: %[[BEGIN:.*]] = arith.minui %{{.*}}, %[[NNZ]]
// SPLIT: %[[END:.*]] = arith.minui %{{.*}}, %[[NNZ]]
// SPLIT: scf.if
// SPLIT: %[[FIRST:.*]]:2 = scf.while
// SPLIT: %[[LAST:.*]]:3 = scf.for %[[P:.*]] = %[[BEGIN]] to %[[END]] step %{{.*}} iter_args(%[[ROW:.*]] = %[[FIRST]]#0, %[[BOUND:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (index, index, f32)
// SPLIT: %[[NEXT:.*]] = arith.cmpi uge, %[[P]], %[[BOUND]]
// SPLIT: scf.if %[[NEXT]] -> (index, index, f32)
// SPLIT: memref.atomic_rmw addf %[[ACC]], %[[Y]][%[[ROW]]]
// SPLIT: scf.while
// SPLIT: memref.load %[[CRD]][%[[P]]]
// SPLIT: memref.load %[[VAL]][%[[P]]]
// SPLIT: memref.atomic_rmw addf %[[LAST]]#2, %[[Y]][%[[LAST]]#0]
func.func @csr_spmv(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %x: memref<?xf32>, %y: memref<?xf32>, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    %p0 = memref.load %pos[%i] : memref<?xi32>
    %lo = arith.index_castui %p0 : i32 to index
    %i1 = arith.addi %i, %c1 : index
    %p1 = memref.load %pos[%i1] : memref<?xi32>
    %hi = arith.index_castui %p1 : i32 to index
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %c = memref.load %crd[%p] : memref<?xi32>
      %j = arith.index_cast %c : i32 to index
      %v = memref.load %val[%p] : memref<?xf32>
      %xv = memref.load %x[%j] : memref<?xf32>
      %t = arith.mulf %v, %xv : f32
      %a = arith.addf %acc, %t : f32
      scf.yield %a : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// balance=nonzeros with output columns (SpMM): a warp per share of the
// entries (32 lanes x 4 warps a block, blocks over shares x column tiles), each
// lane a column; the zero fill of C is a launch of its own; each row's part of
// a column is added atomically, only by lanes whose column exists.
// SPLIT-LABEL: func.func @csr_spmm
// SPLIT-SAME: (%[[POS:.*]]: memref<?xi32>, %[[CRD:.*]]: memref<?xi32>, %[[VAL:.*]]: memref<?xf32>, %[[B:.*]]: memref<?x?xf32>, %[[C:.*]]: memref<?x?xf32>, %[[M:.*]]: index, %[[N:.*]]: index)
// SPLIT: memref.store %{{.*}}, %[[C]][%{{.*}}, %{{.*}}] : memref<?x?xf32>
// SPLIT: %[[SHARES:.*]] = arith.ceildivsi %[[M]], %c4
// SPLIT: %[[TILES:.*]] = arith.ceildivsi %[[N]], %c32
// SPLIT: scf.parallel (%[[LANE:.*]], %[[SLOT:.*]]) = {{.*}} to (%c32{{[_0-9]*}}, %c4{{[_0-9]*}})
// SPLIT: %[[COL:.*]] = arith.addi %{{.*}}, %[[LANE]]
// SPLIT: %[[THERE:.*]] = arith.cmpi ult, %[[COL]], %[[N]]
// SPLIT: %[[J:.*]] = arith.minui %[[COL]], %{{.*}}
// SPLIT: scf.for %[[P:.*]] =
// SPLIT: scf.if %[[THERE]]
// SPLIT: memref.atomic_rmw addf %{{.*}}, %[[C]][%{{.*}}, %[[J]]]
// SPLIT: memref.load %[[B]][%{{.*}}, %[[J]]]
func.func @csr_spmm(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %j = %c0 to %n step %c1 {
      %p0 = memref.load %pos[%i] : memref<?xi32>
      %lo = arith.index_castui %p0 : i32 to index
      %i1 = arith.addi %i, %c1 : index
      %p1 = memref.load %pos[%i1] : memref<?xi32>
      %hi = arith.index_castui %p1 : i32 to index
      %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
        %k = memref.load %crd[%p] : memref<?xi32>
        %kk = arith.index_cast %k : i32 to index
        %v = memref.load %val[%p] : memref<?xf32>
        %bv = memref.load %b[%kk, %j] : memref<?x?xf32>
        %t = arith.mulf %v, %bv : f32
        %a = arith.addf %acc, %t : f32
        scf.yield %a : f32
      }
      memref.store %s, %c[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A two-dimensional nest (a 2-D output's fill): rows over its first dimension,
// the second a column loop inside, so the columns schedule maps it (lanes on
// the columns, coalesced stores) instead of leaving it to the host.
// CHECK-LABEL: func.func @fill_2d
// CHECK: scf.parallel (%{{.*}}) =
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %{{.*}}) to (%c32, %c4)
// CHECK: scf.if
// CHECK: scf.if
// CHECK-NEXT: memref.store
// CHECK: processor = thread_x{{.*}}processor = thread_y
// CHECK: processor = block_x
func.func @fill_2d(%c: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%m, %n) step (%c1, %c1) {
    memref.store %z, %c[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}
