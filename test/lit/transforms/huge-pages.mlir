// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-huge-pages | FileCheck %s --enable-var-scope
// RUN: sparsecomp-opt %s --split-input-file --sparse-iter-huge-pages='min-bytes=64' | FileCheck %s --check-prefix=SMALL

// A dynamic f32 buffer: 4 * m * n bytes, advised when that is 4 MiB or more,
// on the whole 2 MiB pages between its aligned pointer and its end.
// CHECK: func.func private @madvise(index, index, i32) -> i32
// CHECK-LABEL: func.func @result
// CHECK-SAME: (%[[M:.*]]: index, %[[N:.*]]: index)
// CHECK: %[[BUF:.*]] = memref.alloc(%[[M]], %[[N]]) : memref<?x?xf32>
// CHECK: %[[D0:.*]] = memref.dim %[[BUF]], %{{.*}} : memref<?x?xf32>
// CHECK: %[[S0:.*]] = arith.muli %{{.*}}, %[[D0]] : index
// CHECK: %[[D1:.*]] = memref.dim %[[BUF]], %{{.*}} : memref<?x?xf32>
// CHECK: %[[BYTES:.*]] = arith.muli %[[S0]], %[[D1]] : index
// CHECK: %[[MIN:.*]] = arith.constant 4194304 : index
// CHECK: %[[BIG:.*]] = arith.cmpi uge, %[[BYTES]], %[[MIN]] : index
// CHECK: scf.if %[[BIG]] {
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]] : memref<?x?xf32> -> index
// CHECK: %[[PAGE:.*]] = arith.constant 2097152 : index
// CHECK: %[[MASK:.*]] = arith.constant -2097152 : index
// CHECK: %[[START:.*]] = arith.andi %{{.*}}, %[[MASK]] : index
// CHECK: %[[END_RAW:.*]] = arith.addi %[[P]], %[[BYTES]] : index
// CHECK: %[[END:.*]] = arith.andi %[[END_RAW]], %[[MASK]] : index
// CHECK: %[[TOP:.*]] = arith.maxui %[[END]], %[[START]] : index
// CHECK: %[[LEN:.*]] = arith.subi %[[TOP]], %[[START]] : index
// CHECK: %[[ADVICE:.*]] = arith.constant 14 : i32
// CHECK: func.call @madvise(%[[START]], %[[LEN]], %[[ADVICE]]) : (index, index, i32) -> i32
// CHECK: return %[[BUF]]

// SMALL: arith.constant 64 : index
func.func @result(%m: index, %n: index) -> memref<?x?xf32> {
  %buf = memref.alloc(%m, %n) : memref<?x?xf32>
  return %buf : memref<?x?xf32>
}

// -----

// Static shapes multiply constants; index elements are 8 bytes.
// CHECK-LABEL: func.func @static_index
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<1024x1024xindex>
// CHECK: %[[E:.*]] = arith.constant 8 : index
// CHECK: %[[R:.*]] = arith.constant 1024 : index
// CHECK: arith.muli %[[E]], %[[R]] : index
// CHECK: func.call @madvise
func.func @static_index() -> memref<1024x1024xindex> {
  %buf = memref.alloc() : memref<1024x1024xindex>
  return %buf : memref<1024x1024xindex>
}

// -----

// No allocation, no declaration; complex elements are left alone.
// CHECK-NOT: @madvise
// CHECK-LABEL: func.func @none
// CHECK-LABEL: func.func @complex
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: return
func.func @none(%x: memref<?xf32>) -> memref<?xf32> {
  return %x : memref<?xf32>
}
func.func @complex(%m: index) -> memref<?xcomplex<f32>> {
  %buf = memref.alloc(%m) : memref<?xcomplex<f32>>
  return %buf : memref<?xcomplex<f32>>
}

// -----

// A module that already declares libc's madvise keeps its one declaration.
// CHECK-COUNT-1: func.func private @madvise
// CHECK-NOT: func.func private @madvise
func.func private @madvise(index, index, i32) -> i32
func.func @declared(%m: index) -> memref<?xi8> {
  %buf = memref.alloc(%m) : memref<?xi8>
  return %buf : memref<?xi8>
}
