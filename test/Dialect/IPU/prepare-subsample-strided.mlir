// RUN: tessera-opt %s --ipu-prepare-for-mapping --split-input-file | FileCheck %s

// A 1x1 convolution of stride 2 reads rows and columns 2 * o: the strided
// elements are taken first, by a copying generic of the 3x3 it uses, and
// the convolution reads that densely.

// CHECK-DAG: #[[$SUB:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2, d3 * 2)>
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)>
// CHECK-LABEL: func.func @pointwise_stride2
// CHECK: %[[S:.*]] = linalg.generic {indexing_maps = [#[[$SUB]], #[[$ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x4x6x6xf32>) outs(%{{.*}} : tensor<1x4x3x3xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[X]]
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], {{.*}}]{{.*}} ins(%[[S]], %arg1 : tensor<1x4x3x3xf32>, tensor<8x4x1x1xf32>)
func.func @pointwise_stride2(%x: tensor<1x4x6x6xf32>, %w: tensor<8x4x1x1xf32>) -> tensor<1x8x3x3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x3x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
         ins(%x, %w : tensor<1x4x6x6xf32>, tensor<8x4x1x1xf32>) outs(%init : tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32>
  return %y : tensor<1x8x3x3xf32>
}

// -----

// A 3x3 window of stride 2 reads every element of its input rows (2 * o + k):
// nothing to subsample.

// CHECK-LABEL: func.func @window_stride2
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : f32)
// CHECK-NOT: linalg.generic
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<1x4x7x7xf32>, tensor<8x4x3x3xf32>)
func.func @window_stride2(%x: tensor<1x4x7x7xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x3x3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x3x3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
         ins(%x, %w : tensor<1x4x7x7xf32>, tensor<8x4x3x3xf32>) outs(%init : tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32>
  return %y : tensor<1x8x3x3xf32>
}
