// RUN: tessera-opt %s --split-input-file --canonicalize | FileCheck %s

// The Shape -> Gather -> Concat -> Reshape pattern of exported models folds
// to a static reshape.
// CHECK-LABEL: func.func @shape_subgraph
// CHECK-NOT: graph.gather
// CHECK-NOT: graph.concat
// CHECK: %[[R:.*]] = graph.reshape %arg0 : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: return %[[R]]
func.func @shape_subgraph(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %shape = graph.constant dense<[2, 3, 4]> : tensor<3xi64>
  %i = graph.constant dense<0> : tensor<1xi64>
  %d0 = graph.gather %shape, %i {axis = 0} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %m = graph.constant dense<-1> : tensor<1xi64>
  %c = graph.concat %d0, %m {axis = 0} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %three = graph.constant dense<3> : tensor<2xi64>
  %p = graph.mul %c, %three : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %r = graph.reshape %x : tensor<2x3x4xf32> -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>
}

// -----

// CHECK-LABEL: func.func @fold_arith
// CHECK-DAG: graph.constant dense<[6, -3]> : tensor<2xi64>
// CHECK-DAG: graph.constant dense<[true, false]> : tensor<2xi1>
// CHECK-DAG: graph.constant dense<[2.000000e+00, 5.000000e-01]> : tensor<2xf32>
func.func @fold_arith() -> (tensor<2xi64>, tensor<2xi1>, tensor<2xf32>) {
  %a = graph.constant dense<[12, -7]> : tensor<2xi64>
  %b = graph.constant dense<2> : tensor<2xi64>
  %q = graph.div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %lt = graph.less %q, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
  %nlt = graph.not %lt : tensor<2xi1>
  %f = graph.cast %b : tensor<2xi64> to tensor<2xf32>
  %h = graph.constant dense<[1.0, 0.25]> : tensor<2xf32>
  %s = graph.mul %f, %h : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %q, %nlt, %s : tensor<2xi64>, tensor<2xi1>, tensor<2xf32>
}

// -----

// x + 0 and x * 1 are x; a splat that does not change the shape is an identity.
// CHECK-LABEL: func.func @identities
// CHECK-NOT: graph.add
// CHECK-NOT: graph.mul
// CHECK: return %arg0
func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %z = graph.constant dense<0.0> : tensor<3xf32>
  %o = graph.constant dense<1.0> : tensor<f32>
  %0 = graph.add %x, %z : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.mul %o, %0 : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @chains
// CHECK-NEXT: %[[R:.*]] = graph.reshape %arg0 : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[T:.*]] = graph.transpose %arg1 {perm = array<i64: 2, 0, 1>}
// CHECK-NEXT: return %[[R]], %[[T]], %arg1
func.func @chains(%x: tensor<2x3x4xf32>, %y: tensor<2x3x4xf32>)
    -> (tensor<24xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = graph.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = graph.reshape %0 : tensor<6x4xf32> -> tensor<24xf32>
  %2 = graph.transpose %y {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %3 = graph.transpose %2 {perm = array<i64: 2, 1, 0>} : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %4 = graph.transpose %y {perm = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %5 = graph.reshape %4 : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %1, %3, %5 : tensor<24xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Explicit broadcasts feeding broadcasting ops are dropped; broadcasts of
// splat constants become splat constants.
// CHECK-LABEL: func.func @broadcasts
// CHECK-NOT: graph.expand
// CHECK: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<4x3xf32>
// CHECK: %[[A:.*]] = graph.add %arg0, %arg1 : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
// CHECK: return %[[A]], %[[C]]
func.func @broadcasts(%x: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %e = graph.expand %b : tensor<3xf32> -> tensor<4x3xf32>
  %0 = graph.add %x, %e : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %1 = graph.expand %two : tensor<f32> -> tensor<4x3xf32>
  return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// An expand that the other operand does not cover stays.
// CHECK-LABEL: func.func @needed_expand
// CHECK: graph.expand
func.func @needed_expand(%x: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  %e = graph.expand %b : tensor<3xf32> -> tensor<4x3xf32>
  %0 = graph.add %x, %e : (tensor<3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @data_movement_constants
// CHECK-DAG: graph.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: graph.constant dense<[3, 1]> : tensor<2xi64>
// CHECK-DAG: graph.constant dense<[1, 2, 3, 4, 5, 6, 7]> : tensor<7xi64>
func.func @data_movement_constants() -> (tensor<3x2xi64>, tensor<2xi64>, tensor<7xi64>) {
  %c = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %t = graph.transpose %c {perm = array<i64: 1, 0>} : tensor<2x3xi64> -> tensor<3x2xi64>
  %f = graph.reshape %c : tensor<2x3xi64> -> tensor<6xi64>
  %s = graph.slice %f {starts = array<i64: 2>, limits = array<i64: -1>, strides = array<i64: -2>} : tensor<6xi64> -> tensor<2xi64>
  %seven = graph.constant dense<7> : tensor<1xi64>
  %j = graph.concat %f, %seven {axis = 0} : (tensor<6xi64>, tensor<1xi64>) -> tensor<7xi64>
  return %t, %s, %j : tensor<3x2xi64>, tensor<2xi64>, tensor<7xi64>
}

// -----

// A gather at constant indices that step evenly is a strided slice: x[:, 0]
// (a scalar index drops the axis) and x[:, [1, 3, 5]]; uneven indices stay
// a gather.
// CHECK-LABEL: func.func @gather_constant_indices
// CHECK: %[[S0:.*]] = graph.slice %arg0 {limits = array<i64: 2, 1, 4>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x6x4xf32> -> tensor<2x1x4xf32>
// CHECK: graph.reshape %[[S0]] : tensor<2x1x4xf32> -> tensor<2x4xf32>
// CHECK: graph.slice %arg0 {limits = array<i64: 2, 6, 4>, starts = array<i64: 0, 1, 0>, strides = array<i64: 1, 2, 1>} : tensor<2x6x4xf32> -> tensor<2x3x4xf32>
// CHECK: graph.gather
func.func @gather_constant_indices(%x: tensor<2x6x4xf32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %zero = graph.constant dense<0> : tensor<i64>
  %odd = graph.constant dense<[1, 3, -1]> : tensor<3xi64>
  %uneven = graph.constant dense<[0, 4, 5]> : tensor<3xi64>
  %0 = graph.gather %x, %zero {axis = 1 : i64} : (tensor<2x6x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  %1 = graph.gather %x, %odd {axis = 1 : i64} : (tensor<2x6x4xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  %2 = graph.gather %x, %uneven {axis = 1 : i64} : (tensor<2x6x4xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
