// RUN: tessera-opt %s --split-input-file --convert-graph-to-linalg | FileCheck %s
// Numerics of these lowerings are checked against PyTorch by
// test/python/test_linalg_numerics.py; this file pins their structure.

// Broadcasting is an indexing map: the size-1 dim reads index 0.
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-LABEL: func.func @broadcast_add
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
// CHECK-NOT: graph.
func.func @broadcast_add(%a: tensor<4x3xf32>, %b: tensor<1x3xf32>) -> tensor<4x3xf32> {
  %0 = graph.add %a, %b : (tensor<4x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Convolution: one generic over n, g, f, oh, ow (parallel) and c, kh, kw
// (reduction), strides and dilations in the input map, accumulating from
// zero; the bias is added after it, read at the channel index (the form
// ipu-map-tiles runs in the convolution's own compute set).
// CHECK-DAG: #[[$IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 * 2 + d6 * 2, d4 * 2 + d7 * 2)>
// CHECK-DAG: #[[$W:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
// CHECK-DAG: #[[$ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$CH:.*]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: func.func @conv
// CHECK: tensor.pad
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x2x3x4x4xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[$IN]], #[[$W]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins({{.*}} : tensor<1x2x2x11x11xf32>, tensor<2x3x2x3x3xf32>) outs(%[[ZERO]] : tensor<1x2x3x4x4xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[NCHW:.*]] = tensor.reshape %[[SUM]]
// CHECK: linalg.generic {indexing_maps = [#[[$ID4]], #[[$CH]], #[[$ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[NCHW]], %arg2 : tensor<1x6x4x4xf32>, tensor<6xf32>)
// CHECK: arith.addf
func.func @conv(%x: tensor<1x4x9x9xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) -> tensor<1x6x4x4xf32> {
  %0 = graph.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>, groups = 2} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  return %0 : tensor<1x6x4x4xf32>
}

// -----

// Max pooling pads with -inf and reduces over a window given by a dummy
// operand of the window's shape.
// CHECK-LABEL: func.func @max_pool
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK: tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 2, 2]
// CHECK: tensor.yield %[[NEG]]
// CHECK: %[[WIN:.*]] = tensor.empty() : tensor<3x3xi1>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[WIN]] : tensor<1x2x11x11xf32>, tensor<3x3xi1>)
// CHECK: arith.maximumf
func.func @max_pool(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x5x5xf32> {
  %0 = graph.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<1x2x8x8xf32>) -> tensor<1x2x5x5xf32>
  return %0 : tensor<1x2x5x5xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_mean
// CHECK: linalg.reduce { arith.addf } ins(%arg0 : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<2x4xf32>) dimensions = [1]
// CHECK: tensor.reshape {{.*}} -> tensor<2x1x4xf32>
// CHECK: arith.constant 3.000000e+00 : f32
// CHECK: arith.divf
func.func @reduce_mean(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
  %0 = graph.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  return %0 : tensor<2x1x4xf32>
}

// -----

// Matmul with a broadcast batch dim: a contraction whose map reads batch 0.
// CHECK-DAG: #[[$LHS:.*]] = affine_map<(d0, d1, d2, d3) -> (0, d1, d3)>
// CHECK-DAG: #[[$RHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-LABEL: func.func @matmul
// CHECK: linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[$LHS]], #[[$RHS]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
func.func @matmul(%a: tensor<1x4x5xf32>, %b: tensor<3x5x6xf32>) -> tensor<3x4x6xf32> {
  %0 = graph.matmul %a, %b : (tensor<1x4x5xf32>, tensor<3x5x6xf32>) -> tensor<3x4x6xf32>
  return %0 : tensor<3x4x6xf32>
}

// -----

// A negative-stride slice: extract_slice of the elements, then a reversal.
// CHECK-DAG: #[[$REV:.*]] = affine_map<(d0) -> (-d0 + 5)>
// CHECK-LABEL: func.func @reverse
// CHECK: %[[S:.*]] = tensor.extract_slice %arg0[0] [6] [1]
// CHECK: linalg.generic {indexing_maps = [#[[$REV]], {{.*}}]{{.*}} ins(%[[S]]
func.func @reverse(%x: tensor<6xf32>) -> tensor<6xf32> {
  %0 = graph.slice %x {starts = array<i64: 5>, limits = array<i64: -1>, strides = array<i64: -1>} : tensor<6xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

// Weights stay ml_program loads.
// CHECK-LABEL: func.func @weights
// CHECK: ml_program.global_load_const @w
ml_program.global private @w(dense<1.0> : tensor<3xf32>) : tensor<3xf32>
func.func @weights(%x: tensor<3xf32>) -> tensor<3xf32> {
  %w = ml_program.global_load_const @w : tensor<3xf32>
  %0 = graph.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// A random op is one generic over its result: each element hashes its
// row-major index (linalg.index, strides 3 and 1) with the key mixed from
// the scalar seed, counter and stream, and keeps 24 bits for f32.
// CHECK-LABEL: func.func @random_uniform
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<i64>, tensor<i64>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK-DAG: linalg.index 0
// CHECK-DAG: linalg.index 1
// CHECK-DAG: arith.constant -7046029254386353131 : i64
// CHECK-DAG: arith.constant 40 : i64
// CHECK: arith.uitofp
func.func @random_uniform(%seed: tensor<i64>, %counter: tensor<i64>) -> tensor<2x3xf32> {
  %0 = graph.random_uniform %seed, %counter {stream = 2 : i64, low = 0.0 : f64, high = 1.0 : f64} : (tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// scatter_add: a reduction over the index positions; each result element
// adds the updates whose (wrapped) index is its row.
// CHECK-DAG: #[[$IDX:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[$UPD:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @scatter_add
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[$IDX]], #[[$UPD]], #[[$OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%arg1, %arg0 : tensor<5xi64>, tensor<5x4xf32>) outs(%[[Z]] : tensor<10x4xf32>)
// CHECK: %[[ROW:.*]] = linalg.index 0
// CHECK: arith.cmpi eq, %{{.*}}, %[[ROW]]
// CHECK: arith.select
// CHECK: arith.addf
func.func @scatter_add(%u: tensor<5x4xf32>, %i: tensor<5xi64>) -> tensor<10x4xf32> {
  %0 = graph.scatter_add %u, %i {axis = 0 : i64} : (tensor<5x4xf32>, tensor<5xi64>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}
