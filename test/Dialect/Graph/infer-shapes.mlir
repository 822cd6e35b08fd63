// RUN: tessera-opt %s --split-input-file --graph-infer-shapes | FileCheck %s

// Unknown dims refine through the body once the arguments are known, and
// the signature follows.
// CHECK-LABEL: func.func @refine
// CHECK-SAME: -> tensor<1x8x4x4xf32>
// CHECK: graph.conv {{.*}} -> tensor<1x8x4x4xf32>
// CHECK: graph.relu %{{.*}} : tensor<1x8x4x4xf32>
func.func @refine(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<?x8x?x?xf32> {
  %0 = graph.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<?x8x?x?xf32>
  %1 = graph.relu %0 : tensor<?x8x?x?xf32>
  return %1 : tensor<?x8x?x?xf32>
}

// -----

// Dynamic inputs stay dynamic where nothing fixes them.
// CHECK-LABEL: func.func @dynamic
// CHECK: graph.add {{.*}} -> tensor<?x3xf32>
func.func @dynamic(%x: tensor<?x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %0 = graph.add %x, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
