// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-lower-iterations=vector-bits=0 --canonicalize --cse | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-lower-iterations='vector-bits=256 unroll=2 slice-bytes=0' --canonicalize --cse | FileCheck %s --enable-var-scope --check-prefix=VEC
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-lower-iterations='vector-bits=256 unroll=2 panel-bytes=65536 slice-bytes=0' --canonicalize --cse | FileCheck %s --enable-var-scope --check-prefix=PANEL
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-lower-iterations='vector-bits=256 unroll=2 slice-bytes=65536' --canonicalize --cse | FileCheck %s --enable-var-scope --check-prefix=SLICE

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// SpMV: the row loop runs in parallel; y[i] is read once, accumulated in a
// register over the row's positions, and written once. y is an argument: its
// elements are read from it and written to a fresh tensor (no copy of y).
// CHECK-LABEL: func.func @spmv
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, {{.*}}>, %[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>)
// CHECK-DAG: %[[POS:.*]] = sparse_iter.positions %[[A]][1]
// CHECK-DAG: %[[CRD:.*]] = sparse_iter.coordinates %[[A]][1]
// CHECK-DAG: %[[VAL:.*]] = sparse_iter.values %[[A]]
// CHECK-DAG: %[[M:.*]] = tensor.dim %[[Y]]
// CHECK: %[[FRESH:.*]] = tensor.empty(%[[M]]) : tensor<?xf32>
// CHECK: %[[R:.*]] = scf.for %[[I:[^ ]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[OUT:[^ ]+]] = %[[FRESH]])
// CHECK:   %[[YI:.*]] = tensor.extract %[[Y]][%[[I]]]
// CHECK:   %[[LO:.*]] = arith.index_cast
// CHECK:   %[[HI:.*]] = arith.index_cast
// CHECK:   %[[ACC:.*]] = scf.for %[[Q:[^ ]+]] = %[[LO]] to %[[HI]] step %{{.*}} iter_args(%[[S:[^ ]+]] = %[[YI]]) -> (f32)
// CHECK:     %[[J:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:     %[[AV:.*]] = tensor.extract %[[VAL]][%[[Q]]]
// CHECK:     %[[XV:.*]] = tensor.extract %[[X]][%[[J]]]
// CHECK:     %[[M:.*]] = arith.mulf %[[AV]], %[[XV]]
// CHECK:     %[[N:.*]] = arith.addf %[[S]], %[[M]]
// CHECK:     scf.yield %[[N]]
// CHECK:   tensor.insert %[[ACC]] into %[[OUT]][%[[I]]]
// CHECK: } {sparse_iter.parallel}
// CHECK: return %[[R]]
func.func @spmv(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// SpMM: the dense column loop moves outside the position loop, in chunks of
// unroll x lanes, keeping the output chunk in vector registers.
// VEC-LABEL: func.func @spmm
// VEC: scf.for %[[I:[^ ]+]] = {{.*}} {
// VEC:   scf.for %[[K:[^ ]+]] = %{{.*}} to %{{.*}} step %c16
// VEC:     %[[M0:.*]] = vector.create_mask %{{.*}} : vector<8xi1>
// VEC:     %[[M1:.*]] = vector.create_mask %{{.*}} : vector<8xi1>
// VEC:     %[[C0:.*]] = vector.transfer_read %{{.*}}[%[[I]], %[[K]]], %{{.*}}, %[[M0]]
// VEC:     %[[C1:.*]] = vector.transfer_read %{{.*}}[%[[I]], %{{.*}}], %{{.*}}, %[[M1]]
// VEC:     %[[ACC:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %[[C0]], %{{.*}} = %[[C1]]) -> (vector<8xf32>, vector<8xf32>)
// VEC:       vector.transfer_read %{{.*}}, %[[M0]]
// VEC:       vector.broadcast
// VEC:       arith.mulf {{.*}} : vector<8xf32>
// VEC:       arith.addf {{.*}} : vector<8xf32>
// VEC:     vector.transfer_write %[[ACC]]#0, %{{.*}}[%[[I]], %[[K]]], %[[M0]]
// VEC:     vector.transfer_write %[[ACC]]#1
// VEC: } {sparse_iter.parallel}
// With panel-bytes, B's columns go in panels of 65536 / (4 * rows of B)
// bytes, rounded down to whole chunks of 16 (at least one); the whole nest,
// parallel row loop included, runs once per panel.
// PANEL-LABEL: func.func @spmm
// PANEL-SAME: >>, %[[B:[^:]+]]: tensor<?x?xf32>,
// PANEL: %[[N:.*]] = tensor.dim %[[B]], %c1 : tensor<?x?xf32>
// PANEL: %[[ROWS:.*]] = tensor.dim %[[B]], %c0 : tensor<?x?xf32>
// PANEL: %[[COL:.*]] = arith.muli %[[ROWS]], %c4 : index
// PANEL: %[[PER:.*]] = arith.maxui %[[COL]], %c1 : index
// PANEL: %[[COLS:.*]] = arith.divui %c65536, %[[PER]] : index
// PANEL: %[[CHUNKS:.*]] = arith.divui %[[COLS]], %c16 : index
// PANEL: %[[ATLEAST:.*]] = arith.maxui %[[CHUNKS]], %c1 : index
// PANEL: %[[W:.*]] = arith.muli %[[ATLEAST]], %c16 : index
// PANEL: scf.for %[[LO:[^ ]+]] = %c0 to %[[N]] step %[[W]]
// PANEL:   %[[END:.*]] = arith.addi %[[LO]], %[[W]] : index
// PANEL:   %[[HI:.*]] = arith.minui %[[END]], %[[N]] : index
// The panel's columns of B are first copied into a contiguous buffer, its
// rows in parallel, a vector at a time.
// PANEL:   %[[WIDTH:.*]] = arith.subi %[[HI]], %[[LO]] : index
// PANEL:   %[[EMPTY:.*]] = tensor.empty(%[[ROWS]], %[[WIDTH]]) : tensor<?x?xf32>
// PANEL:   %[[PACKED:.*]] = scf.for %[[R:[^ ]+]] = %c0 to %[[ROWS]] step %c1 iter_args(%{{.*}} = %[[EMPTY]])
// PANEL:     scf.for %[[C:[^ ]+]] = %c0 to %[[WIDTH]] step %c8
// PANEL:       %[[AT:.*]] = arith.addi %[[LO]], %[[C]] : index
// PANEL:       %[[V:.*]] = vector.transfer_read %[[B]][%[[R]], %[[AT]]]
// PANEL:       vector.transfer_write %[[V]], %{{.*}}[%[[R]], %[[C]]]
// PANEL:   } {sparse_iter.parallel}
// PANEL:   scf.for
// PANEL:     scf.for %[[K:[^ ]+]] = %[[LO]] to %[[HI]] step %c16
// PANEL:       %[[REST:.*]] = arith.subi %[[HI]], %[[K]] : index
// PANEL:       vector.create_mask %[[REST]] : vector<8xi1>
// The nest reads B from the packed panel, at columns relative to its start.
// PANEL:         %[[REL:.*]] = arith.subi %[[K]], %[[LO]] : index
// PANEL:         vector.transfer_read %[[PACKED]][%{{.*}}, %[[REL]]]
// PANEL:   } {sparse_iter.parallel}
// SDDMM's vector dimension is a reduction: no panels.
// PANEL-LABEL: func.func @sddmm
// PANEL-NOT: arith.divui
// PANEL: } {sparse_iter.parallel}
// With slice-bytes, the nest runs once per slice of B's rows: as many
// slices as B's bytes need to fit 65536 each (where B's rows are 256 bytes
// or more), capped so that rows keep 32
// entries per slice on average, at least one. Each row's positions are
// narrowed to the slice's coordinates once, before its vector chunks, by
// binary search (scf.while): the first slice's start and the last slice's
// end need none; the loop is clamped to the row. The first slice starts from
// C (the outs operand), the others from what the slices before wrote.
// SLICE-LABEL: func.func @spmm
// SLICE-SAME: (%[[A:[^:]+]]: {{.*}}, %[[B:[^:]+]]: tensor<?x?xf32>, %[[C:[^:]+]]: tensor<?x?xf32>)
// SLICE-DAG: %[[POS:.*]] = sparse_iter.positions %[[A]][1]
// SLICE-DAG: %[[CRD:.*]] = sparse_iter.coordinates %[[A]][1]
// SLICE-DAG: %[[ROWS:.*]] = tensor.dim %[[B]], %c0
// SLICE-DAG: %[[K:.*]] = tensor.dim %[[B]], %c1
// SLICE: %[[ROWB:.*]] = arith.muli %[[K]], %c4 : index
// SLICE: %[[TOTAL:.*]] = arith.muli %[[ROWS]], %[[ROWB]] : index
// SLICE: %[[LONG:.*]] = arith.cmpi uge, %[[ROWB]], %c256 : index
// SLICE: %[[SLICES:.*]] = arith.ceildivui %[[TOTAL]], %c65536 : index
// SLICE: %[[WANT:.*]] = arith.select %[[LONG]], %[[SLICES]], %c1 : index
// SLICE: %[[NNZ:.*]] = tensor.dim %[[CRD]], %c0
// SLICE: %[[RUNS:.*]] = arith.divui %[[NNZ]], %{{.*}} : index
// SLICE: %[[CAP:.*]] = arith.minui %[[WANT]], %[[RUNS]] : index
// SLICE: %[[COUNT:.*]] = arith.maxui %[[CAP]], %c1 : index
// SLICE: %[[W:.*]] = arith.ceildivui %[[ROWS]], %[[COUNT]] : index
// SLICE: %[[FINAL:.*]] = arith.subi %[[COUNT]], %c1 : index
// SLICE: scf.for %[[S:[^ ]+]] = %c0 to %[[COUNT]] step %c1 iter_args(%[[OUT:[^ ]+]] =
// SLICE:   %[[LO:.*]] = arith.muli %[[S]], %[[W]] : index
// SLICE:   %[[FIRST:.*]] = arith.cmpi eq, %[[S]], %c0 : index
// SLICE:   %[[LAST:.*]] = arith.cmpi eq, %[[S]], %[[FINAL]] : index
// SLICE:   scf.for %[[I:[^ ]+]] =
// SLICE:     %[[RLO:.*]] = arith.index_castui
// SLICE:     %[[RHI:.*]] = arith.index_castui
// SLICE:     %[[START:.*]] = scf.if %[[FIRST]] -> (index) {
// SLICE:       scf.yield %[[RLO]] : index
// SLICE:     } else {
// SLICE:       scf.while (%{{.*}} = %[[RLO]], %{{.*}} = %[[RHI]])
// SLICE:         tensor.extract %[[CRD]]
// SLICE:         arith.cmpi slt, %{{.*}}, %[[LO]] : index
// SLICE:     %[[END:.*]] = scf.if %[[LAST]] -> (index) {
// SLICE:       scf.yield %[[RHI]] : index
// SLICE:     } else {
// SLICE:       scf.while (%{{.*}} = %[[START]], %{{.*}} = %[[RHI]])
// SLICE:     %[[QLO:.*]] = arith.maxui %[[START]], %[[RLO]] : index
// SLICE:     %[[QHI:.*]] = arith.minui %[[END]], %[[RHI]] : index
// SLICE:     scf.for %[[J:[^ ]+]] = {{.*}} iter_args(%[[CUR:[^ ]+]] =
// SLICE:       scf.if %[[FIRST]] -> (vector<8xf32>, vector<8xf32>) {
// SLICE:         vector.transfer_read %[[C]][%[[I]], %[[J]]]
// SLICE:       } else {
// SLICE:         vector.transfer_read %[[CUR]][%[[I]], %[[J]]]
// SLICE-NOT:   scf.while
// SLICE:       scf.for %{{.*}} = %[[QLO]] to %[[QHI]] step %c1
// SLICE:   } {sparse_iter.parallel}
// SDDMM's vector dimension is a reduction: no slices.
// SLICE-LABEL: func.func @sddmm
// SLICE-NOT: scf.while
// SLICE: } {sparse_iter.parallel}
func.func @spmm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, k)>],
                       iterator_types = ["parallel", "reduction", "parallel"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// An outs operand that is an argument seen through a tensor.cast (a variant
// with static sizes): still read from the argument, written to a fresh tensor.
// CHECK-LABEL: func.func @spmv_cast_outs
// CHECK-SAME: %[[Y:[^:]+]]: tensor<8xf32>)
// CHECK: %[[FRESH:.*]] = tensor.empty() : tensor<8xf32>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[FRESH]])
// CHECK:   tensor.extract %[[Y]]
func.func @spmv_cast_outs(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %y: tensor<8xf32>) -> tensor<?xf32> {
  %c = tensor.cast %y : tensor<8xf32> to tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%c : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// SDDMM with a sparse output of S's structure: values are computed per
// position of S, each from zero in a register (the output is a tensor.empty
// and every position is visited once: no fill, no read); the k reduction is
// vectorized into partial sums.
// CHECK-LABEL: func.func @sddmm
// CHECK-SAME: (%[[S:.*]]: tensor<?x?xf32, {{.*}}>,
// CHECK: %[[VAL:.*]] = sparse_iter.values %[[S]]
// CHECK: %[[DIM:.*]] = tensor.dim %[[VAL]]
// CHECK: %[[E:.*]] = tensor.empty(%[[DIM]]) : tensor<?xf32>
// CHECK-NOT: linalg.fill
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[E]])
// CHECK: } {sparse_iter.parallel}
// CHECK: %[[W:.*]] = sparse_iter.with_values %[[S]], %[[R]]
// CHECK: return %[[W]]
// VEC-LABEL: func.func @sddmm
// VEC: %[[SUMS:.*]]:2 = scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>)
// VEC:   arith.select
// VEC: %[[T:.*]] = arith.addf %[[SUMS]]#0, %[[SUMS]]#1 fastmath<reassoc,contract> : vector<8xf32>
// VEC: vector.reduction <add>, %[[T]], %{{.*}} : vector<8xf32> into f32
func.func @sddmm(%S: tensor<?x?xf32, #csr>, %X: tensor<?x?xf32>, %Y: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %S, %c1 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32, #csr>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>,
                                        affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%S, %X, %Y : tensor<?x?xf32, #csr>, tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32, #csr>) {
  ^bb0(%s: f32, %x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %q = arith.mulf %s, %p : f32
    %t = arith.addf %o, %q : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#bsr = #sparse_iter.layout<{map = (i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, i mod 2 : dense, j mod 3 : dense), posWidth = 32, crdWidth = 32}>

// BSR SpMV, jammed (lowering/jam.py, one scalar per row): the block row's two
// rows are read above the block loop (the second clamped to the last row that
// exists) and accumulated in registers over the blocks; a block's columns run
// a loop of constant trips where the block is whole (levels.dense_loop), the
// clamped loop only at the matrix's right edge; the second row is written
// only where it exists. Dimension coordinates are block * size + offset.
// CHECK-LABEL: func.func @bsr_spmv
// CHECK: %[[ROWS:.*]] = arith.ceildivsi %{{.*}}, %c2
// CHECK: scf.for %[[BI:[^ ]+]] = %c0 to %[[ROWS]]
// CHECK:   %[[R0:.*]] = arith.muli %[[BI]], %c2
// CHECK:   %[[RLEFT:.*]] = arith.subi %{{.*}}, %[[R0]]
// CHECK:   %[[RN:.*]] = arith.minsi %[[RLEFT]], %c2
// CHECK:   %[[LAST:.*]] = arith.addi %[[R0]], %{{.*}}
// CHECK:   %[[R1:.*]] = arith.minui %{{.*}}, %[[LAST]]
// CHECK:   %[[Y0:.*]] = tensor.extract %{{.*}}[%[[R0]]]
// CHECK:   %[[Y1:.*]] = tensor.extract %{{.*}}[%[[R1]]]
// CHECK:   %[[ACC:.*]]:2 = scf.for %[[Q:[^ ]+]] = {{.*}} iter_args(%{{.*}} = %[[Y0]], %{{.*}} = %[[Y1]]) -> (f32, f32)
// CHECK:     %[[CN:.*]] = arith.minsi %{{.*}}, %c3
// CHECK:     %[[WHOLE:.*]] = arith.cmpi eq, %[[CN]], %c3
// CHECK:     scf.if %[[WHOLE]]
// CHECK:       scf.for %{{.*}} = %c0 to %c3 step %c1
// CHECK:     } else {
// CHECK:       scf.for %{{.*}} = %c0 to %[[CN]] step %c1
// CHECK:   tensor.insert %[[ACC]]#0 into %{{.*}}[%[[R0]]]
// CHECK:   %[[THERE:.*]] = arith.cmpi ugt, %[[RN]], %c1
// CHECK:   scf.if %[[THERE]]
// CHECK:     tensor.insert %[[ACC]]#1 into %{{.*}}[%[[R1]]]
// CHECK: } {sparse_iter.parallel}
func.func @bsr_spmv(%A: tensor<?x?xf32, #bsr>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %x : tensor<?x?xf32, #bsr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#bsr41 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 1 : compressed, i mod 4 : dense, j mod 1 : dense), posWidth = 32, crdWidth = 32}>

// SpMM over BSR 4x1, jammed (lowering/jam.py): the 4 rows x 2 vectors of a
// block row start from the fill's zero above the block loop (no fill pass);
// each row of B is read once per block and feeds the 4 rows; rows past the
// edge of a partial block row are written at the last row through an
// all-false mask; a block one column wide has no loop over its columns.
// VEC-LABEL: func.func @bsr_spmm_jam
// VEC-NOT: linalg.fill
// VEC: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// VEC: %[[NONE:.*]] = arith.constant dense<false> : vector<8xi1>
// VEC: scf.for %[[BI:[^ ]+]] = {{.*}} {
// VEC:   scf.for %[[J:[^ ]+]] = %{{.*}} to %{{.*}} step %c16
// VEC:     %[[M0:.*]] = vector.create_mask %{{.*}} : vector<8xi1>
// VEC:     %[[M1:.*]] = vector.create_mask %{{.*}} : vector<8xi1>
// VEC:     %[[FIRST:.*]] = arith.muli %[[BI]], %c4
// VEC:     %[[LAST:.*]] = arith.addi %[[FIRST]], %{{.*}} : index
// VEC:     %[[R1:.*]] = arith.minui %{{.*}}, %[[LAST]] : index
// VEC:     %[[IN1:.*]] = arith.cmpi ugt, %{{.*}}, %c1 : index
// VEC:     %[[M10:.*]] = arith.select %[[IN1]], %[[M0]], %[[NONE]] : vector<8xi1>
// VEC:     %[[ACC:.*]]:8 = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]], {{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// VEC-NOT:   scf.for
// VEC:         vector.transfer_read
// VEC:         vector.broadcast
// VEC:         vector.transfer_read
// VEC-NOT:     vector.transfer_read
// VEC-COUNT-3: vector.broadcast
// VEC-NOT:     vector.transfer_read
// VEC:         scf.yield
// VEC:     vector.transfer_write %[[ACC]]#0, %{{.*}}[%[[FIRST]], %[[J]]], %[[M0]]
// VEC:     vector.transfer_write %[[ACC]]#1
// VEC:     vector.transfer_write %[[ACC]]#2, %{{.*}}[%[[R1]], %[[J]]], %[[M10]]
// VEC: } {sparse_iter.parallel}
func.func @bsr_spmm_jam(%A: tensor<?x?xf32, #bsr41>, %B: tensor<?x?xf32>, %m: index, %n: index) -> tensor<?x?xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %B : tensor<?x?xf32, #bsr41>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#bsr41 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 1 : compressed, i mod 4 : dense, j mod 1 : dense), posWidth = 32, crdWidth = 32}>

// SpMM plus a bias per row (C = bias[:, None], then C += A B: a linear
// layer's Y^T = W X^T + b): the broadcast is not materialized. Each jammed
// row's accumulators start from its bias element, read once per chunk.
// VEC-LABEL: func.func @bsr_spmm_bias
// VEC-SAME: %[[BIAS:[^:]+]]: tensor<?xf32>
// VEC-NOT: linalg.generic
// VEC: scf.for %[[BI:[^ ]+]] = {{.*}} {
// VEC:   scf.for %[[J:[^ ]+]] = %{{.*}} to %{{.*}} step %c16
// VEC:     %[[FIRST:.*]] = arith.muli %[[BI]], %c4
// VEC:     %[[B0:.*]] = tensor.extract %[[BIAS]][%[[FIRST]]] : tensor<?xf32>
// VEC:     %[[V0:.*]] = vector.broadcast %[[B0]] : f32 to vector<8xf32>
// VEC-COUNT-3: tensor.extract %[[BIAS]]
// VEC:     scf.for {{.*}} iter_args(%{{.*}} = %[[V0]], %{{.*}} = %[[V0]],
// VEC: } {sparse_iter.parallel}
// VEC-NOT: linalg.generic
func.func @bsr_spmm_bias(%A: tensor<?x?xf32, #bsr41>, %B: tensor<?x?xf32>, %bias: tensor<?xf32>, %n: index) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %bias, %c0 : tensor<?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%bias : tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%b: f32, %o: f32):
    linalg.yield %b : f32
  } -> tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %B : tensor<?x?xf32, #bsr41>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#bsr41 = #sparse_iter.layout<{map = (i, j) -> (i floordiv 4 : dense, j floordiv 1 : compressed, i mod 4 : dense, j mod 1 : dense), posWidth = 32, crdWidth = 32}>

// A linear layer as torch holds it: Y = X A^T, X and Y row-major (Y[j, i] +=
// A[i, k] X[j, k]). The tokens j are vectorized all the same: X is packed
// transposed (a stripe of 8 tokens at a time, all its 8 x 8 tiles along k,
// transposed in registers by shuffles; a whole tile with plain loads and
// stores, one at an edge with masks), the panels (one vector chunk of 16
// tokens each) run in parallel and the block rows in turn within each, and each jammed
// block row's 4 x 8 tile is transposed into 8 vectors of 4 rows, stored in
// Y's rows without masks when the tile is whole.
// VEC-LABEL: func.func @bsr_linear
// VEC-SAME: %[[X:[^:]+]]: tensor<?x?xf32>, %[[Y:[^:]+]]: tensor<?x?xf32>
// VEC: %[[TOKENS:.*]] = tensor.dim %[[X]], %c0 : tensor<?x?xf32>
// VEC: scf.for %[[LO:[^ ]+]] = %c0 to %[[TOKENS]] step %c16 iter_args
// VEC:   %[[DEPTH:.*]] = tensor.dim %[[X]], %c1 : tensor<?x?xf32>
// VEC:   %[[EMPTY:.*]] = tensor.empty(%[[DEPTH]], %[[WIDTH:[^)]+]]) : tensor<?x?xf32>
// VEC:   %[[PACKED:.*]] = scf.for %{{.*}} = %c0 to %[[WIDTH]] step %c8 iter_args(%{{.*}} = %[[EMPTY]])
// VEC:     scf.for %{{.*}} = %c0 to %[[DEPTH]] step %c8
// VEC:     %[[TILE:.*]] = arith.andi
// VEC:     scf.if %[[TILE]]
// VEC-COUNT-8: vector.transfer_read %[[X]]{{.*}} {in_bounds = [true]}
// VEC-COUNT-24: vector.shuffle
// VEC-COUNT-8: vector.transfer_write {{.*}} {in_bounds = [true]}
// VEC:     } else {
// VEC:       vector.transfer_read %[[X]][%{{.*}}, %{{.*}}], %{{.*}}, %{{.*}} : tensor<?x?xf32>, vector<8xf32>
// VEC-COUNT-24: vector.shuffle
// VEC-COUNT-8: vector.transfer_write
// VEC-NOT: sparse_iter.parallel
// VEC:   scf.for %[[BR:[^ ]+]] = %c0 to %{{.*}} step %c1
// VEC:     scf.for %{{.*}} = %[[LO]] to %{{.*}} step %c16
// VEC:       vector.transfer_read %[[PACKED]]
// VEC:       vector.shuffle
// VEC:       %[[WHOLE:.*]] = arith.andi
// VEC:       scf.if %[[WHOLE]]
// VEC:         vector.transfer_write %{{.*}} {in_bounds = [true]} : vector<4xf32>, tensor<?x?xf32>
// VEC:       } else {
// VEC:         vector.transfer_write %{{.*}}, %{{.*}}, %{{.*}} : vector<4xf32>, tensor<?x?xf32>
// VEC-NOT: sparse_iter.parallel
// VEC: } {sparse_iter.parallel}
func.func @bsr_linear(%A: tensor<?x?xf32, #bsr41>, %X: tensor<?x?xf32>, %Y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (j, i)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %X : tensor<?x?xf32, #bsr41>, tensor<?x?xf32>) outs(%Y : tensor<?x?xf32>) {
  ^bb0(%a: f32, %x: f32, %o: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// The same with CSR: rows are grouped by eight (lowering/jam.py, Group).
// Each row of a group runs its entries into its own accumulators (the rows
// past the last skip theirs), then the group's 8 x 8 tiles are transposed
// and stored as one vector of 8 rows per row of Y.
// VEC-LABEL: func.func @csr_linear
// VEC: scf.for
// VEC:   scf.for %[[G:[^ ]+]] = %c0 to %{{.*}} step %c8
// VEC-NOT: sparse_iter.parallel
// VEC:     scf.for %[[J:[^ ]+]] =
// VEC:       scf.for
// VEC-COUNT-7: scf.if
// VEC:       vector.shuffle
// VEC:       scf.if
// VEC:         vector.transfer_write %{{.*}}, %{{.*}}[%[[J]], %[[G]]] {in_bounds = [true]} : vector<8xf32>
// VEC: } {sparse_iter.parallel}
func.func @csr_linear(%A: tensor<?x?xf32, #csr>, %X: tensor<?x?xf32>, %Y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (j, i)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %X : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%Y : tensor<?x?xf32>) {
  ^bb0(%a: f32, %x: f32, %o: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#dcsr = #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed), posWidth = 32, crdWidth = 32}>

// DCSR: the rows are not a dense level, so not grouped; each row's chunk of
// Y[j, i] is read and written along Y's first index (element by element, a
// row of Y apart).
// VEC-LABEL: func.func @dcsr_linear
// VEC:   scf.for %[[Q:[^ ]+]] = %{{.*}} to %{{.*}} step %c1 iter_args
// VEC:     %[[ROW:.*]] = tensor.extract %{{.*}}[%[[Q]]] : tensor<?xi32>
// VEC:     %[[I:.*]] = arith.index_cast %[[ROW]] : i32 to index
// VEC:     scf.for %[[J:[^ ]+]] =
// VEC:       vector.transfer_read %{{.*}}[%[[J]], %[[I]]], %{{.*}}, %{{.*}} {permutation_map = #[[ALONG:.*]]}
// VEC:       vector.transfer_write %{{.*}}, %{{.*}}[%[[J]], %[[I]]], %{{.*}} {permutation_map = #[[ALONG]]}
// VEC: } {sparse_iter.parallel}
func.func @dcsr_linear(%A: tensor<?x?xf32, #dcsr>, %X: tensor<?x?xf32>, %Y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (j, i)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %X : tensor<?x?xf32, #dcsr>, tensor<?x?xf32>) outs(%Y : tensor<?x?xf32>) {
  ^bb0(%a: f32, %x: f32, %o: f32):
    %p = arith.mulf %a, %x : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#ell = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed_fixed), posWidth = 32, crdWidth = 32}>

// ELL: fixed slots per row; padding (coordinate -1) is skipped.
// CHECK-LABEL: func.func @ell_spmv
// CHECK-NOT: sparse_iter.positions
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     %[[VALID:.*]] = arith.cmpi sge
// CHECK:     scf.if %[[VALID]]
func.func @ell_spmv(%A: tensor<?x?xf32, #ell>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %x : tensor<?x?xf32, #ell>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#coo = #sparse_iter.layout<{map = (i, j) -> (i : compressed(nonunique), j : singleton), posWidth = 32, crdWidth = 32}>

// COO: a nonunique first level is not parallel (rows repeat); the singleton
// level reads the column at the same position.
// CHECK-LABEL: func.func @coo_scale
// CHECK: linalg.fill
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK: tensor.insert
// CHECK-NOT: sparse_iter.parallel
// CHECK: return
func.func @coo_scale(%A: tensor<?x?xf32, #coo>, %d: tensor<?x?xf32>, %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A, %d : tensor<?x?xf32, #coo>, tensor<?x?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// A zero-producing body that reads its output (C .* A): the output is filled
// with zeros, but the body reads C's value from before the fill.
// CHECK-LABEL: func.func @out_times_csr
// CHECK-SAME: %[[A:[^:]*]]: tensor<?x?xf32, {{.*}}>, %[[C:[^:]*]]: tensor<?x?xf32>)
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[C]] : tensor<?x?xf32>)
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[Z]])
// CHECK: %[[OLD:.*]] = tensor.extract %[[C]][
// CHECK: arith.mulf %[[OLD]], %{{.*}}
// CHECK: tensor.insert
func.func @out_times_csr(%A: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A : tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %o, %a : f32
    linalg.yield %m : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// SpGEMM builds a new structure row by row. First each block of rows bounds
// its multiply-adds from B's row lengths (a parallel loop), summed into block
// offsets, and the entries the columns its rows span allow. Up to 2^28
// multiply-adds, and at most 4 times those entries, one pass: each block builds its rows at a
// cursor (carried from its offset) into temporaries as long as the bound,
// counting them, sorting each row's columns and gathering the values; a
// column is recorded without a branch (written at the row's next slot, the
// count grown by whether the column is new; each column's 32-bit stamp and
// its value's bits side by side in one workspace); the
// counts are summed into positions and each block's rows copied to their
// place. Above it, the count pass (a 32-bit tag array per block marks the
// row's columns), a prefix sum into positions, and the fill pass. Either way,
// sparse_iter.assemble.
// CHECK-LABEL: func.func @spgemm
// CHECK: %[[BOUNDS:.*]]:2 = scf.for {{.*}} -> (tensor<?xindex>, tensor<?xindex>) {
// CHECK-NOT: arith.cmpi ne
// CHECK: } {sparse_iter.parallel}
// CHECK: %[[OFFS:.*]]:3 = scf.for {{.*}} -> (tensor<?xindex>, index, index) {
// CHECK:   tensor.extract %[[BOUNDS]]#0
// CHECK:   tensor.extract %[[BOUNDS]]#1
// CHECK: %[[FITS:.*]] = arith.cmpi ule, %[[OFFS]]#1, %c268435456
// CHECK: %[[ROOM:.*]] = arith.muli %[[OFFS]]#2, %c4
// CHECK: %[[SPREAD:.*]] = arith.cmpi ule, %[[OFFS]]#1, %[[ROOM]]
// CHECK: %[[ONEPASS:.*]] = arith.andi %[[FITS]], %[[SPREAD]]
// CHECK: %[[BUILT:.*]]:3 = scf.if %[[ONEPASS]] -> (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>) {
// CHECK:   %[[TCRD:.*]] = tensor.empty(%[[OFFS]]#1) : tensor<?xi32>
// CHECK:   %[[TVAL:.*]] = tensor.empty(%[[OFFS]]#1) : tensor<?xf32>
// CHECK:   %[[ONE:.*]]:3 = scf.for {{.*}} iter_args({{.*}}, {{.*}} = %[[TCRD]], {{.*}} = %[[TVAL]])
// CHECK:     linalg.fill {{.*}} -> tensor<?xi32>
// CHECK:     %[[CURSOR:.*]] = tensor.extract %[[OFFS]]#0
// CHECK:     scf.for {{.*}} iter_args({{.*}}, %{{.*}} = %[[CURSOR]]) -> ({{.*}}, index)
// CHECK:       %[[NEW:.*]] = arith.cmpi ne
// CHECK-NOT:   scf.if
// CHECK:       %[[GROW:.*]] = arith.index_castui %[[NEW]] : i1 to index
// CHECK:       arith.addi %{{.*}}, %[[GROW]] : index
// CHECK:       arith.bitcast %{{.*}} : i32 to f32
// CHECK:       arith.mulf
// CHECK:       arith.bitcast %{{.*}} : f32 to i32
// CHECK:       scf.while
// CHECK:   } {sparse_iter.parallel}
// CHECK:   %[[POS1:.*]]:3 = scf.for {{.*}} -> (tensor<?xi32>, tensor<?xindex>, index) {
// CHECK:     tensor.extract %[[ONE]]#0
// CHECK:   %[[COPY:.*]]:2 = scf.for {{.*}} -> (tensor<?xi32>, tensor<?xf32>) {
// CHECK:     scf.for
// CHECK:       tensor.extract %[[ONE]]#1
// CHECK:       tensor.extract %[[ONE]]#2
// CHECK:   } {sparse_iter.parallel}
// CHECK:   scf.yield %[[POS1]]#0, %[[COPY]]#0, %[[COPY]]#1
// CHECK: } else {
// CHECK:   %[[COUNTS:.*]] = scf.for {{.*}} -> (tensor<?xindex>) {
// CHECK:     linalg.fill {{.*}} -> tensor<?xi32>
// CHECK:     arith.cmpi ne
// CHECK:   } {sparse_iter.parallel}
// CHECK:   %[[POS:.*]]:3 = scf.for {{.*}} -> (tensor<?xi32>, tensor<?xindex>, index) {
// CHECK:     tensor.extract %[[COUNTS]]
// CHECK:   %[[CRD:.*]] = tensor.empty(%[[POS]]#2) : tensor<?xi32>
// CHECK:   %[[VAL:.*]] = tensor.empty(%[[POS]]#2) : tensor<?xf32>
// CHECK:   %[[FILL:.*]]:2 = scf.for {{.*}} iter_args({{.*}} = %[[CRD]], {{.*}} = %[[VAL]])
// CHECK:     arith.mulf
// CHECK:     scf.while
// CHECK:   } {sparse_iter.parallel}
// CHECK:   scf.yield %[[POS]]#0, %[[FILL]]#0, %[[FILL]]#1
// CHECK: %[[C:.*]] = sparse_iter.assemble positions(%[[BUILT]]#0 : {{.*}}) coordinates(%[[BUILT]]#1 : {{.*}}) values(%[[BUILT]]#2 : {{.*}}) sizes(%{{.*}}, %{{.*}})
// CHECK: return %[[C]]
func.func @spgemm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>, %m: index, %n: index) -> tensor<?x?xf32, #csr> {
  %C = tensor.empty(%m, %n) : tensor<?x?xf32, #csr>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32, #csr>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// A + B of two differently structured CSR matrices into a dense output: each
// row of A, then of B, is scattered into its own workspace; the union of
// their columns is recorded in a list and each recorded column is written once.
// CHECK-LABEL: func.func @add_dense
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<?x?xf32>) {
// CHECK: linalg.fill {{.*}} -> tensor<?xf32>
// CHECK: arith.addf
// CHECK: tensor.insert {{.*}} : tensor<?x?xf32>
// CHECK: } {sparse_iter.parallel}
func.func @add_dense(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32, #csr>, %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32, #csr>) outs(%C : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// A threshold sparsifier on the output of an elementwise op is fused: the
// body runs in the count pass and again in the fill pass, and the dense
// x + b is never built.
// CHECK-LABEL: func.func @fused_threshold
// CHECK-NOT: linalg.generic
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     arith.addf
// CHECK:     math.absf
// CHECK:     arith.cmpf oge
// CHECK: } {sparse_iter.parallel}
// CHECK: scf.for {{.*}} -> (tensor<?xi32>, tensor<?xindex>, index)
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     arith.addf
// CHECK:     scf.if
// CHECK: } {sparse_iter.parallel}
// CHECK: sparse_iter.assemble
func.func @fused_threshold(%x: tensor<?x?xf32>, %b: tensor<?xf32>, %m: index, %n: index) -> tensor<?x?xf32, #csr> {
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
    ins(%x, %b : tensor<?x?xf32>, tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  %s = "sparse_iter.sparsify"(%y) {sparsifier = #sparse_iter.sparsifier<threshold[0.5]>}
      : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  return %s : tensor<?x?xf32, #csr>
}

// -----

#hyb = #sparse_iter.composable<[#sparse_iter.part<ell_bucket[0, 1, 0, 2], #sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed_fixed[2]), posWidth = 32, crdWidth = 32}>>, #sparse_iter.part<rest, #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>>]>

// SpMV over a composable matrix runs once per part, the first part's result
// the second part's output: an ELL bucket (a row list, two slots per row,
// padding skipped), then the CSR rest, whose rows all have more than 2
// entries (the bucket takes rows of 1 or 2): its row loop says so. Both loops
// name their group (for the GPU schedule). The bucket writes only its listed
// rows, which no other part writes; the rest's dense rows write every row, so
// it does not claim disjoint rows (on a GPU it adds atomically).
// CHECK-LABEL: func.func @spmv_hyb
// CHECK-SAME: (%[[A:.*]]: tensor<?x?xf32, {{.*}}>, %[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>)
// CHECK: sparse_iter.get_part %[[A]][0]
// CHECK: %[[R0:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[Y]])
// CHECK:   arith.cmpi sge
// CHECK: } {sparse_iter.disjoint_rows, sparse_iter.parallel, sparse_iter.parts_group = [[G:[0-9]+]] : i64}
// CHECK: sparse_iter.get_part %[[A]][1]
// CHECK: %[[R1:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[R0]])
// CHECK: } {sparse_iter.min_row_entries = 3 : i64, sparse_iter.parallel, sparse_iter.parts_group = [[G]] : i64}
// CHECK: return %[[R1]]
func.func @spmv_hyb(%A: tensor<?x?xf32, #hyb>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %x : tensor<?x?xf32, #hyb>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>

// The row loop visits every y[i] once, so y starts from the fill's constant
// in a register: no fill pass over y, no read of it.
// CHECK-LABEL: func.func @spmv_from_fill
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[E:.*]] = tensor.empty
// CHECK-NOT: linalg.
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[E]])
// CHECK-NOT: tensor.extract %arg
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (f32)
func.func @spmv_from_fill(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %m: index) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?xf32>
  %y = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
    ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>

// A conversion CSR -> CSC is a counting sort by column: a walk counts each
// column's entries, a prefix sum gives the positions, each column's cursor
// starts at its position, and a second walk stores row and value at the
// cursor; the buffers are assembled into the CSC tensor.
// CHECK-LABEL: func.func @csr_to_csc
// CHECK: %[[POS:.*]] = sparse_iter.positions %{{.*}}[1]
// CHECK: %[[CRD:.*]] = sparse_iter.coordinates %{{.*}}[1]
// CHECK: %[[VAL:.*]] = sparse_iter.values
// CHECK: %[[ROWS:.*]] = tensor.dim %{{.*}}, %c0
// CHECK: %[[COLS:.*]] = tensor.dim %{{.*}}, %c1
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%c0 : index) outs(%{{.*}} : tensor<?xindex>)
// CHECK: %[[COUNTS:.*]] = scf.for %{{.*}} = %c0 to %[[ROWS]] step %c1 iter_args(%{{.*}} = %[[ZEROS]])
// CHECK:   scf.for
// CHECK:     %[[J:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:     %[[N:.*]] = tensor.extract %{{.*}}[%[[J]]] : tensor<?xindex>
// CHECK:     arith.addi %[[N]], %c1 : index
// CHECK: %[[PREFIX:.*]]:3 = scf.for %{{.*}} = %c0 to %[[COLS]] {{.*}} -> (tensor<?xi32>, tensor<?xindex>, index)
// CHECK: %[[CURSOR:.*]] = scf.for %{{.*}} = %c0 to %[[COLS]] step %c1 iter_args(%{{.*}} = %[[COUNTS]])
// CHECK: %[[NEW_CRD:.*]] = tensor.empty(%[[PREFIX]]#2) : tensor<?xi32>
// CHECK: %[[NEW_VAL:.*]] = tensor.empty(%[[PREFIX]]#2) : tensor<?xf32>
// CHECK: %[[FILLED:.*]]:3 = scf.for %[[I:.*]] = %c0 to %[[ROWS]] step %c1 iter_args(%{{.*}} = %[[CURSOR]], %{{.*}} = %[[NEW_CRD]], %{{.*}} = %[[NEW_VAL]])
// CHECK:   scf.for
// CHECK:     %[[SLOT:.*]] = tensor.extract %{{.*}}[%{{.*}}] : tensor<?xindex>
// CHECK:     %[[I32:.*]] = arith.index_cast %[[I]] : index to i32
// CHECK:     tensor.insert %[[I32]] into %{{.*}}[%[[SLOT]]] : tensor<?xi32>
// CHECK:     tensor.insert %{{.*}} into %{{.*}}[%[[SLOT]]] : tensor<?xf32>
// CHECK: %[[CSC:.*]] = sparse_iter.assemble positions(%[[PREFIX]]#0 : {{.*}}) coordinates(%[[FILLED]]#1 : {{.*}}) values(%[[FILLED]]#2 : {{.*}}) sizes(%[[ROWS]], %[[COLS]])
// CHECK: return %[[CSC]]
func.func @csr_to_csc(%A: tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc> {
  %r = "sparse_iter.set_encoding"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csc>
  return %r : tensor<?x?xf32, #csc>
}

// -----

// An elementwise consumer of the result (ReLU) is applied to each row's sum
// before it is stored (an epilogue): no second loop over y.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#vec = {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
// CHECK-LABEL: func.func @spmv_relu
// CHECK: scf.for
// CHECK: %[[SUM:.*]] = scf.for
// CHECK: %[[R:.*]] = arith.maximumf %[[SUM]], %{{.*}} : f32
// CHECK: tensor.insert %[[R]]
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @spmv_relu(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
    ^bb0(%av: f32, %xv: f32, %acc: f32):
      %pr = arith.mulf %av, %xv : f32
      %su = arith.addf %acc, %pr : f32
      linalg.yield %su : f32
  } -> tensor<?xf32>
  %e2 = tensor.empty(%m) : tensor<?xf32>
  %g = linalg.generic #vec ins(%r : tensor<?xf32>) outs(%e2 : tensor<?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %p = arith.maximumf %a, %zero : f32
      linalg.yield %p : f32
  } -> tensor<?xf32>
  return %g : tensor<?xf32>
}

// -----

// SpMM then a scaled ReLU reading a function argument: on the vector
// accumulators (the scalar broadcast), before each row chunk is written.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#mat = {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
// CHECK-LABEL: func.func @spmm_scaled_relu
// CHECK-SAME: %[[ALPHA:[a-z0-9]+]]: f32
// CHECK: arith.mulf %{{.*}}, %[[ALPHA]] {{.*}}: f32
// CHECK: arith.maximumf
// CHECK: tensor.insert
// CHECK-NOT: linalg.generic
// VEC-LABEL: func.func @spmm_scaled_relu
// VEC-SAME: %[[ALPHA:[a-z0-9]+]]: f32
// VEC-DAG: %[[SPLAT:.*]] = vector.broadcast %[[ALPHA]] : f32 to vector<8xf32>
// VEC: %[[SCALED:.*]] = arith.mulf %{{.*}}, %[[SPLAT]] {{.*}}: vector<8xf32>
// VEC: %[[RELU:.*]] = arith.maximumf %[[SCALED]], %{{.*}} : vector<8xf32>
// VEC: vector.transfer_write %[[RELU]]
// VEC-NOT: linalg.generic
// VEC: return
// With the reduction sliced, every slice writes the row chunks; only the
// last applies the consumer.
// SLICE-LABEL: func.func @spmm_scaled_relu
// SLICE: scf.for %{{.*}} iter_args
// SLICE: arith.cmpi eq, %{{.*}}, %c0 : index
// SLICE-NEXT: %[[LAST:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : index
// SLICE: %[[SUMS:.*]]:2 = scf.for
// SLICE: %[[OUT:.*]]:2 = scf.if %[[LAST]] -> (vector<8xf32>, vector<8xf32>) {
// SLICE: arith.maximumf
// SLICE: } else {
// SLICE-NEXT: scf.yield %[[SUMS]]#0, %[[SUMS]]#1
// SLICE: vector.transfer_write %[[OUT]]#0
// SLICE-NOT: linalg.generic
// SLICE: return
func.func @spmm_scaled_relu(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>, %alpha: f32) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>) outs(%C : tensor<?x?xf32>) {
    ^bb0(%av: f32, %bv: f32, %acc: f32):
      %pr = arith.mulf %av, %bv : f32
      %su = arith.addf %acc, %pr : f32
      linalg.yield %su : f32
  } -> tensor<?x?xf32>
  %e2 = tensor.empty(%m, %n) : tensor<?x?xf32>
  %g = linalg.generic #mat ins(%r : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.mulf %a, %alpha : f32
      %p = arith.maximumf %s, %zero : f32
      linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %g : tensor<?x?xf32>
}

// -----

// Not applied as an epilogue: the product is used twice (returned too), the
// consumer reads its own output, and a CSC SpMV writes each element once per
// column (partial sums): each consumer stays a loop of its own.
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 32, crdWidth = 32}>
#csc = #sparse_iter.layout<{map = (i, j) -> (j : dense, i : compressed), posWidth = 32, crdWidth = 32}>
#vec = {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
// CHECK-LABEL: func.func @twice
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-LABEL: func.func @reads_output
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-LABEL: func.func @csc
// CHECK: scf.for
// CHECK: linalg.generic
func.func @twice(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
    ^bb0(%av: f32, %xv: f32, %acc: f32):
      %pr = arith.mulf %av, %xv : f32
      %su = arith.addf %acc, %pr : f32
      linalg.yield %su : f32
  } -> tensor<?xf32>
  %g = linalg.generic #vec ins(%r : tensor<?xf32>) outs(%y : tensor<?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %p = arith.maximumf %a, %zero : f32
      linalg.yield %p : f32
  } -> tensor<?xf32>
  return %r, %g : tensor<?xf32>, tensor<?xf32>
}
func.func @reads_output(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>, %y: tensor<?xf32>, %z: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
    ^bb0(%av: f32, %xv: f32, %acc: f32):
      %pr = arith.mulf %av, %xv : f32
      %su = arith.addf %acc, %pr : f32
      linalg.yield %su : f32
  } -> tensor<?xf32>
  %g = linalg.generic #vec ins(%r : tensor<?xf32>) outs(%z : tensor<?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %p = arith.addf %a, %o : f32
      linalg.yield %p : f32
  } -> tensor<?xf32>
  return %g : tensor<?xf32>
}
func.func @csc(%A: tensor<?x?xf32, #csc>, %x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%A, %x : tensor<?x?xf32, #csc>, tensor<?xf32>) outs(%y : tensor<?xf32>) {
    ^bb0(%av: f32, %xv: f32, %acc: f32):
      %pr = arith.mulf %av, %xv : f32
      %su = arith.addf %acc, %pr : f32
      linalg.yield %su : f32
  } -> tensor<?xf32>
  %g = linalg.generic #vec ins(%r : tensor<?xf32>) outs(%y : tensor<?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %p = arith.maximumf %a, %zero : f32
      linalg.yield %p : f32
  } -> tensor<?xf32>
  return %g : tensor<?xf32>
}
