// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-guard-coordinates | FileCheck %s --enable-var-scope

// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[POS:[a-z0-9]+]]: memref<?xi32>, %[[CRD:[a-z0-9]+]]: memref<?xi32>
// CHECK-SAME: %[[M:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index, %[[X:[a-z0-9]+]]: memref<?xf32>
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32>
// CHECK-SAME: \22guarded\22:true}
// CHECK-SAME: \22status\22:true
// CHECK-NOT: sparse_iter.guard
// CHECK: %[[TOP:.*]] = arith.constant 2147483648 : index
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[N]], %[[TOP]] : index
// CHECK: %[[LIMIT:.*]] = arith.index_castui %[[CLAMPED]] : index to i32
// Rows per tile: 2048 coordinates' worth, at most a 64th of the rows, 1 to 1024.
// CHECK: %[[END_ALL:.*]] = memref.load %[[POS]][%[[M]]]
// CHECK: %[[C2048:.*]] = arith.constant 2048 : index
// CHECK: arith.divui
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: arith.divui %{{.*}}, %[[C64]] : index
// CHECK: %[[C1024:.*]] = arith.constant 1024 : index
// CHECK: %[[TILE:.*]] = arith.minui %{{.*}}, %[[C1024]] : index
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[M]] step %[[TILE]] {
// CHECK: %[[NEXT:.*]] = arith.addi %[[T]], %[[TILE]] : index
// CHECK: %[[END:.*]] = arith.minui %[[NEXT]], %[[M]] : index
// First the max of the tile's coordinates: vectors, the last masked.
// CHECK: %[[FIRST32:.*]] = memref.load %[[POS]][%[[T]]]
// CHECK: %[[LAST32:.*]] = memref.load %[[POS]][%[[END]]]
// CHECK: %[[MAX:.*]] = scf.for %[[Q:.*]] = %{{.*}} step %{{.*}} iter_args(%[[M16:.*]] = %{{.*}}) -> (vector<16xi32>) {
// CHECK-NEXT: %[[V:.*]] = vector.load %[[CRD]][%[[Q]]] : memref<?xi32>, vector<16xi32>
// CHECK-NEXT: %[[M16N:.*]] = arith.maxui %[[M16]], %[[V]] : vector<16xi32>
// CHECK-NEXT: scf.yield %[[M16N]]
// CHECK: %[[MASK:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// CHECK: %[[TAIL:.*]] = vector.maskedload %[[CRD]][%{{.*}}], %[[MASK]]
// CHECK: %[[BOTH:.*]] = arith.maxui %[[MAX]], %[[TAIL]] : vector<16xi32>
// CHECK: %[[HIGHEST:.*]] = vector.reduction <maxui>, %[[BOTH]] : vector<16xi32> into i32
// CHECK: %[[BAD:.*]] = arith.cmpi uge, %[[HIGHEST]], %[[LIMIT]] : i32
// One conditional atomic per tile, which then skips its rows.
// CHECK: scf.if %[[BAD]] {
// CHECK: memref.atomic_rmw ori %{{.*}}, %[[STATUS]][%{{.*}}]
// CHECK-NEXT: } else {
// Else the rows as they were: each coordinate read as it is.
// CHECK: scf.for %[[I:.*]] = %[[T]] to %[[END]] step %{{.*}} {
// CHECK: scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// CHECK-NEXT: %[[J:.*]] = memref.load %[[CRD]][%[[P]]]
// CHECK-NEXT: %[[JX:.*]] = arith.index_cast %[[J]] : i32 to index
// CHECK: memref.load %[[X]][%[[JX]]]
// CHECK-NOT: atomic_rmw
// CHECK: memref.store
// CHECK: } {sparse_iter.parallel}

// SpMV's rows: the parallel loop goes by tiles of rows, and each tile checks
// its rows' coordinates before them (which brings them into cache for the
// rows); its rows read them unchanged.
func.func @rows(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index,
                %x: memref<?xf32>) -> memref<?xf32> attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s1\"]}],\"results\":[{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[null]}]}"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %y = memref.alloc(%m) : memref<?xf32>
  scf.for %i = %c0 to %m step %c1 {
    %lo32 = memref.load %pos[%i] : memref<?xi32>
    %lo = arith.index_castui %lo32 : i32 to index
    %i1 = arith.addi %i, %c1 : index
    %hi32 = memref.load %pos[%i1] : memref<?xi32>
    %hi = arith.index_castui %hi32 : i32 to index
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) {
      %j32 = memref.load %crd[%p] : memref<?xi32>
      %j = arith.index_cast %j32 : i32 to index
      %v = memref.load %val[%p] : memref<?xf32>
      %xj = memref.load %x[%j] : memref<?xf32>
      %t = arith.mulf %v, %xj : f32
      %a = arith.addf %acc, %t : f32
      scf.yield %a : f32
    }
    memref.store %s, %y[%i] : memref<?xf32>
  } {sparse_iter.parallel}
  return %y : memref<?xf32>
}

// -----

// CHECK-LABEL: func.func @no_parallel_loop
// CHECK-SAME: (%{{[a-z0-9]+}}: memref<?xi64>, %[[CRD:[a-z0-9]+]]: memref<?xi64>, %{{[a-z0-9]+}}: memref<?xf64>, %[[N:[a-z0-9]+]]: index
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32>
// A csc layout: the coordinates index rows (dimension 0); a 64-bit limit.
// CHECK: %[[TOP:.*]] = arith.constant -9223372036854775808 : index
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[N]], %[[TOP]] : index
// CHECK: %[[LIMIT:.*]] = arith.index_castui %[[CLAMPED]] : index to i64
// CHECK: %[[SUM:.*]]:2 = scf.for %{{.*}} iter_args(%{{.*}}, %{{.*}}) -> (f64, i1) {
// CHECK: arith.cmpi ult, %{{.*}}, %[[LIMIT]] : i64
// CHECK: scf.if %[[SUM]]#1 {
// CHECK-NEXT: arith.constant 1 : i32
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: memref.atomic_rmw ori %{{.*}}, %[[STATUS]]
// CHECK: return %[[SUM]]#0 : f64

// No parallel loop: "out of range" is reported at the function's end.
func.func @no_parallel_loop(%pos: memref<?xi64>, %crd: memref<?xi64>, %val: memref<?xf64>, %n: index, %m: index,
                   %lo: index, %hi: index, %x: memref<?xf64>) -> f64 attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float64\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d1 : dense, d0 : compressed)}>\",\"buffers\":[[\"pos1\",\"index\"],[\"crd1\",\"index\"],[\"values\",\"float64\"]]},{\"kind\":\"scalar\",\"dtype\":\"int64\"},{\"kind\":\"scalar\",\"dtype\":\"int64\"},{\"kind\":\"dense\",\"dtype\":\"float64\",\"shape\":[\"s0\"]}],\"results\":[{\"kind\":\"scalar\",\"dtype\":\"float64\"}]}"} {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f64
  %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f64) {
    %j64 = memref.load %crd[%p] : memref<?xi64>
    %j = arith.index_cast %j64 : i64 to index
    %xj = memref.load %x[%j] : memref<?xf64>
    %a = arith.addf %acc, %xj : f64
    scf.yield %a : f64
  }
  return %s : f64
}

// -----

// CHECK-LABEL: func.func @one_read
// CHECK-SAME: (%{{[a-z0-9]+}}: memref<?xi32>, %[[CRD:[a-z0-9]+]]: memref<?xi32>
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?xf32>, %{{[a-z0-9]+}}: memref<?xf32>, %[[STATUS:[a-z0-9]+]]: memref<1xi32>
// CHECK: %[[LIMIT:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: %[[ANY:.*]] = scf.for %{{.*}} iter_args(%[[SEEN:.*]] = %[[FALSE]]) -> (i1) {
// CHECK: %[[HERE:.*]] = scf.if %{{.*}} -> (i1) {
// CHECK: %[[J:.*]] = memref.load %[[CRD]]
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: %[[OK:.*]] = arith.cmpi ult, %[[J]], %[[LIMIT]] : i32
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[J]], %[[ZERO]] : i32
// CHECK: %[[OUT:.*]] = arith.xori %[[OK]], %{{.*}} : i1
// CHECK: %[[IDX:.*]] = arith.index_cast %[[SAFE]] : i32 to index
// CHECK: memref.load %[[X]][%[[IDX]]]
// CHECK: scf.yield %[[OUT]] : i1
// CHECK: } else {
// CHECK: scf.yield %{{.*}} : i1
// CHECK: %[[BOTH:.*]] = arith.ori %[[SEEN]], %[[HERE]] : i1
// CHECK: scf.yield %[[BOTH]] : i1
// CHECK: scf.if %[[ANY]] {
// CHECK: memref.atomic_rmw ori %{{.*}}, %[[STATUS]]

// A read at another index, inside an scf.if inside a loop: the value is
// clamped and "out of range" carried out through the if and the loop.
func.func @one_read(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index,
                    %k: index, %x: memref<?xf32>, %y: memref<?xf32>) attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]},{\"kind\":\"scalar\",\"dtype\":\"int64\"},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s1\"]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[null]}],\"results\":[]}"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %k step %c1 {
    %odd = arith.remui %i, %c1 : index
    %is = arith.cmpi eq, %odd, %c0 : index
    scf.if %is {
      %i2 = arith.muli %i, %i : index
      %j32 = memref.load %crd[%i2] : memref<?xi32>
      %j = arith.index_cast %j32 : i32 to index
      %xj = memref.load %x[%j] : memref<?xf32>
      memref.store %xj, %y[%i] : memref<?xf32>
    }
  }
  return
}

// -----

// Coordinates that go elsewhere (a call, a copy into a result) are not
// guarded: the ABI says so, and the runtime keeps checking them.
// CHECK-LABEL: func.func @passed_on
// CHECK-SAME: %{{[a-z0-9]+}}: index)
// CHECK-SAME: \22guarded\22:false
// CHECK-NOT: \22status\22
// CHECK-NOT: sparse_iter.guard
// CHECK: call @elsewhere(%{{.*}}) : (memref<?xi32>) -> ()
func.func private @elsewhere(memref<?xi32>)

func.func @passed_on(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index) attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]}],\"results\":[]}"} {
  func.call @elsewhere(%crd) : (memref<?xi32>) -> ()
  return
}

// -----

// A read inside scf.while: "out of range" rides along with the loop's values
// (a new argument of both regions and a new result).
// CHECK-LABEL: func.func @in_while
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32>)
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: %[[R:.*]]:3 = scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[B0:.*]] = %[[FALSE]]) : (index, f32, i1) -> (index, f32, i1) {
// CHECK: scf.condition(%{{.*}}) %{{.*}}, %{{.*}}, %[[B0]] : index, f32, i1
// CHECK: } do {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: f32, %[[B1:.*]]: i1):
// CHECK: %[[OK:.*]] = arith.cmpi ult
// CHECK: %[[OUT:.*]] = arith.xori %[[OK]]
// CHECK: %[[B2:.*]] = arith.ori %[[B1]], %[[OUT]] : i1
// CHECK: scf.yield %{{.*}}, %{{.*}}, %[[B2]] : index, f32, i1
// CHECK: scf.if %[[R]]#2 {
// CHECK: memref.atomic_rmw ori %{{.*}}, %[[STATUS]]
// CHECK: return %[[R]]#1 : f32
func.func @in_while(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index,
                    %x: memref<?xf32>) -> f32 attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s1\"]}],\"results\":[{\"kind\":\"scalar\",\"dtype\":\"float32\"}]}"} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  %r:2 = scf.while (%p = %c0, %acc = %zero) : (index, f32) -> (index, f32) {
    %more = arith.cmpi ult, %p, %m : index
    scf.condition(%more) %p, %acc : index, f32
  } do {
  ^bb0(%q: index, %a: f32):
    %j32 = memref.load %crd[%q] : memref<?xi32>
    %j = arith.index_cast %j32 : i32 to index
    %xj = memref.load %x[%j] : memref<?xf32>
    %s = arith.addf %a, %xj : f32
    %next = arith.addi %q, %c2 : index
    scf.yield %next, %s : index, f32
  }
  return %r#1 : f32
}

// -----

// A loop that writes memory (SpGEMM's scatter into a row workspace) is not
// one LLVM vectorizes whole: its range is scanned first (an unsigned max, a
// loop LLVM does vectorize) and the loop runs as it was only if all are in
// range.
// CHECK-LABEL: func.func @scatter
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32>)
// CHECK: %[[LIMIT:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: scf.for %{{.*}} {
// CHECK: %[[MAX:.*]] = scf.for %[[Q:.*]] = %[[LO:.*]] to %[[HI:.*]] step %{{.*}} iter_args(%[[M0:.*]] = %{{.*}}) -> (i32) {
// CHECK-NEXT: %[[J:.*]] = memref.load %{{.*}}[%[[Q]]] : memref<?xi32>
// CHECK-NEXT: %[[M1:.*]] = arith.maxui %[[M0]], %[[J]] : i32
// CHECK-NEXT: scf.yield %[[M1]] : i32
// CHECK: %[[BAD:.*]] = arith.cmpi uge, %[[MAX]], %[[LIMIT]] : i32
// CHECK: scf.if %[[BAD]] {
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.for %[[P:.*]] = %[[LO]] to %[[HI]] step %{{.*}} {
// CHECK-NEXT: %[[JJ:.*]] = memref.load %{{.*}}[%[[P]]] : memref<?xi32>
// CHECK-NEXT: arith.index_cast %[[JJ]] : i32 to index
// CHECK: scf.if %[[BAD]] {
// CHECK: memref.atomic_rmw ori %{{.*}}, %[[STATUS]]
// CHECK: } {sparse_iter.parallel}
func.func @scatter(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index,
                   %w: memref<?xf32>) attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s1\"]}],\"results\":[]}"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %m step %c1 {
    %lo32 = memref.load %pos[%i] : memref<?xi32>
    %lo = arith.index_castui %lo32 : i32 to index
    %i1 = arith.addi %i, %c1 : index
    %hi32 = memref.load %pos[%i1] : memref<?xi32>
    %hi = arith.index_castui %hi32 : i32 to index
    scf.for %p = %lo to %hi step %c1 {
      %j32 = memref.load %crd[%p] : memref<?xi32>
      %j = arith.index_cast %j32 : i32 to index
      %v = memref.load %val[%p] : memref<?xf32>
      %old = memref.load %w[%j] : memref<?xf32>
      %new = arith.addf %old, %v : f32
      memref.store %new, %w[%j] : memref<?xf32>
    }
  } {sparse_iter.parallel}
  return
}

// -----

// SpMM's rows: vectors over K per entry. The compare and flag of each read
// hide behind them (the tile's scan measured slower), so the rows keep the
// row loop and the flag is reported once per row.
// CHECK-LABEL: func.func @vector_rows
// CHECK-SAME: %[[STATUS:[a-z0-9]+]]: memref<1xi32>)
// CHECK: %[[LIMIT:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: %[[ROW:.*]]:2 = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<8xf32>, i1) {
// CHECK: %[[J:.*]] = memref.load
// CHECK: arith.cmpi ult, %[[J]], %[[LIMIT]] : i32
// CHECK-NOT: vector.maskedload
// CHECK: scf.if %[[ROW]]#1 {
// CHECK: memref.atomic_rmw ori %{{.*}}, %[[STATUS]]
// CHECK: } {sparse_iter.parallel}
func.func @vector_rows(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>, %m: index, %n: index,
                       %b: memref<?x8xf32>, %c: memref<?x8xf32>) attributes {sparse_iter.guard = array<i64: 0>, sparse_iter.abi = "{\"args\":[{\"kind\":\"sparse\",\"dtype\":\"float32\",\"shape\":[\"s0\",\"s1\"],\"layout\":\"#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>\",\"buffers\":[[\"pos1\",\"int32\"],[\"crd1\",\"int32\"],[\"values\",\"float32\"]]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s1\",8]},{\"kind\":\"dense\",\"dtype\":\"float32\",\"shape\":[\"s0\",8]}],\"results\":[]}"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zeros = arith.constant dense<0.0> : vector<8xf32>
  scf.for %i = %c0 to %m step %c1 {
    %lo32 = memref.load %pos[%i] : memref<?xi32>
    %lo = arith.index_castui %lo32 : i32 to index
    %i1 = arith.addi %i, %c1 : index
    %hi32 = memref.load %pos[%i1] : memref<?xi32>
    %hi = arith.index_castui %hi32 : i32 to index
    %row = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zeros) -> (vector<8xf32>) {
      %j32 = memref.load %crd[%p] : memref<?xi32>
      %j = arith.index_cast %j32 : i32 to index
      %v = memref.load %val[%p] : memref<?xf32>
      %bj = vector.load %b[%j, %c0] : memref<?x8xf32>, vector<8xf32>
      %vv = vector.broadcast %v : f32 to vector<8xf32>
      %next = vector.fma %vv, %bj, %acc : vector<8xf32>
      scf.yield %next : vector<8xf32>
    }
    vector.store %row, %c[%i, %c0] : memref<?x8xf32>, vector<8xf32>
  } {sparse_iter.parallel}
  return
}
