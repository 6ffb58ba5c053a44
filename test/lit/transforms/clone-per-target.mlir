// RUN: sparsecomp-opt %s --split-input-file --pass-pipeline='builtin.module(sparse-iter-clone-per-target)' | FileCheck %s

// Two different targets reach @helper: one copy each, and each call goes to
// its caller's copy. @leaf, below @helper, is copied along.
#sp = #sparse_iter.sparsity<unstructured, density = 0.1>
module attributes {sparse_iter.targets = {
    wide = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 2>,
    narrow = #sparse_iter.cpu<x86_64, features = [sse4.2], vector_bits = 128, threads = 1>}} {
  // CHECK-DAG: func.func private @leaf__narrow({{.*}} attributes {sparse_iter.target = "narrow"}
  // CHECK-DAG: func.func private @leaf__wide({{.*}} attributes {sparse_iter.target = "wide"}
  // CHECK-DAG: func.func private @helper__narrow({{.*}} attributes {sparse_iter.target = "narrow"}
  // CHECK-DAG: func.func private @helper__wide({{.*}} attributes {sparse_iter.target = "wide"}
  // CHECK-NOT: func.func private @helper(
  // CHECK-LABEL: func.func @on_wide
  // CHECK: call @helper__wide
  // CHECK-LABEL: func.func @on_narrow
  // CHECK: call @helper__narrow
  func.func private @leaf(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> {
    return %a : tensor<?x?xf32, #sp>
  }
  func.func private @helper(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> {
    %0 = call @leaf(%a) : (tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
    return %0 : tensor<?x?xf32, #sp>
  }
  func.func @on_wide(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> attributes {sparse_iter.target = "wide"} {
    %0 = call @helper(%a) : (tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
    return %0 : tensor<?x?xf32, #sp>
  }
  func.func @on_narrow(%a: tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp> attributes {sparse_iter.target = "narrow"} {
    %0 = call @helper(%a) : (tensor<?x?xf32, #sp>) -> tensor<?x?xf32, #sp>
    return %0 : tensor<?x?xf32, #sp>
  }
}

// -----

// Two names for the same target description share one copy, which takes the
// first name; a recursive helper's calls to itself stay inside its copy.
#sp = #sparse_iter.sparsity<unstructured>
module attributes {sparse_iter.targets = {
    a = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    b = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    c = #sparse_iter.cpu<x86_64, features = [], vector_bits = 0, threads = 1>}} {
  // CHECK-LABEL: func.func private @rec__a
  // CHECK-SAME: attributes {sparse_iter.target = "a"}
  // CHECK: call @rec__a
  // CHECK-LABEL: func.func private @rec__c
  // CHECK-SAME: attributes {sparse_iter.target = "c"}
  // CHECK: call @rec__c
  // CHECK-LABEL: func.func @f_a
  // CHECK: call @rec__a
  // CHECK-LABEL: func.func @f_b
  // CHECK: call @rec__a
  // CHECK-LABEL: func.func @f_c
  // CHECK: call @rec__c
  func.func private @rec(%a: tensor<?xf32, #sp>, %n: index) -> tensor<?xf32, #sp> {
    %0 = call @rec(%a, %n) : (tensor<?xf32, #sp>, index) -> tensor<?xf32, #sp>
    return %0 : tensor<?xf32, #sp>
  }
  func.func @f_a(%a: tensor<?xf32, #sp>, %n: index) -> tensor<?xf32, #sp> attributes {sparse_iter.target = "a"} {
    %0 = call @rec(%a, %n) : (tensor<?xf32, #sp>, index) -> tensor<?xf32, #sp>
    return %0 : tensor<?xf32, #sp>
  }
  func.func @f_b(%a: tensor<?xf32, #sp>, %n: index) -> tensor<?xf32, #sp> attributes {sparse_iter.target = "b"} {
    %0 = call @rec(%a, %n) : (tensor<?xf32, #sp>, index) -> tensor<?xf32, #sp>
    return %0 : tensor<?xf32, #sp>
  }
  func.func @f_c(%a: tensor<?xf32, #sp>, %n: index) -> tensor<?xf32, #sp> attributes {sparse_iter.target = "c"} {
    %0 = call @rec(%a, %n) : (tensor<?xf32, #sp>, index) -> tensor<?xf32, #sp>
    return %0 : tensor<?xf32, #sp>
  }
}

// -----

// Called from one target only: the helper takes it, no copy.
module attributes {sparse_iter.targets = {
    a = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    b = #sparse_iter.cpu<x86_64, features = [], vector_bits = 0, threads = 1>}} {
  // CHECK-LABEL: func.func private @only_a(
  // CHECK-SAME: attributes {sparse_iter.target = "a"}
  // CHECK-LABEL: func.func private @negative_uncalled(
  // CHECK-NOT: sparse_iter.target
  // CHECK-LABEL: func.func @negative_public(
  // CHECK-NOT: sparse_iter.target
  // CHECK: return
  func.func private @only_a(%x: f32) -> f32 {
    return %x : f32
  }
  func.func private @negative_uncalled(%x: f32) -> f32 {
    return %x : f32
  }
  func.func @negative_public(%x: f32) -> f32 {
    return %x : f32
  }
  func.func @user(%x: f32) -> f32 attributes {sparse_iter.target = "a"} {
    %0 = call @only_a(%x) : (f32) -> f32
    %1 = call @negative_public(%0) : (f32) -> f32
    return %1 : f32
  }
}

// -----

// One target: nothing to do.
module attributes {sparse_iter.targets = {
    host = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>}} {
  // CHECK-LABEL: func.func private @negative_single_target(
  // CHECK-NOT: sparse_iter.target
  // CHECK: return
  func.func private @negative_single_target(%x: f32) -> f32 {
    return %x : f32
  }
  func.func @caller(%x: f32) -> f32 attributes {sparse_iter.target = "host"} {
    %0 = call @negative_single_target(%x) : (f32) -> f32
    return %0 : f32
  }
}

// -----

// Mutually recursive private functions wait on each other; reached from one
// target, the whole cycle takes it. A copy's name never clashes with a
// function the module has (@g__x exists, so the copy is @g__x_1).
module attributes {sparse_iter.targets = {
    x = #sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256, threads = 0>,
    y = #sparse_iter.cpu<x86_64, features = [], vector_bits = 0, threads = 1>}} {
  // CHECK-LABEL: func.func private @ping
  // CHECK-SAME: attributes {sparse_iter.target = "x"}
  // CHECK-LABEL: func.func private @pong
  // CHECK-SAME: attributes {sparse_iter.target = "x"}
  func.func private @ping(%n: index) -> index {
    %0 = call @pong(%n) : (index) -> index
    return %0 : index
  }
  func.func private @pong(%n: index) -> index {
    %0 = call @ping(%n) : (index) -> index
    return %0 : index
  }
  func.func @start(%n: index) -> index attributes {sparse_iter.target = "x"} {
    %0 = call @ping(%n) : (index) -> index
    return %0 : index
  }
  // CHECK-DAG: func.func private @g__x_1({{.*}} attributes {sparse_iter.target = "x"}
  // CHECK-DAG: func.func private @g__y({{.*}} attributes {sparse_iter.target = "y"}
  // CHECK-LABEL: func.func @g__x(
  // CHECK: call @g__x_1
  // CHECK-LABEL: func.func @use_y
  // CHECK: call @g__y
  func.func private @g(%n: index) -> index {
    return %n : index
  }
  func.func @g__x(%n: index) -> index attributes {sparse_iter.target = "x"} {
    %0 = call @g(%n) : (index) -> index
    return %0 : index
  }
  func.func @use_y(%n: index) -> index attributes {sparse_iter.target = "y"} {
    %0 = call @g(%n) : (index) -> index
    return %0 : index
  }
}
