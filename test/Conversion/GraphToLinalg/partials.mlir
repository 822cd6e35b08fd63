// RUN: tessera-opt %s --split-input-file --convert-graph-to-linalg | FileCheck %s
//
// Matmuls and convolutions of 16-bit floats add their partial sums in f32
// (Poplar's and PopTorch's default partials type) and round each result
// once to the result's type; with `graph.partials_type = f16` on the module
// (--precision fp16.16, --partials-type half) they add in fp16. Sums of
// 16-bit floats add in f32 whatever the partials type.

// CHECK-LABEL: func.func @matmul_f16
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ACC:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<3x2xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<3x4xf16>, tensor<4x2xf16>) outs(%[[ACC]] : tensor<3x2xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f16, %[[B:.*]]: f16, %[[OUT:.*]]: f32):
// CHECK-NEXT: %[[WA:.*]] = arith.extf %[[A]] : f16 to f32
// CHECK-NEXT: %[[WB:.*]] = arith.extf %[[B]] : f16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[WA]], %[[WB]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[OUT]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<3x2xf32>) outs(%{{.*}} : tensor<3x2xf16>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: return %[[R]] : tensor<3x2xf16>
func.func @matmul_f16(%x: tensor<3x4xf16>, %w: tensor<4x2xf16>) -> tensor<3x2xf16> {
  %0 = graph.matmul %x, %w : (tensor<3x4xf16>, tensor<4x2xf16>) -> tensor<3x2xf16>
  return %0 : tensor<3x2xf16>
}

// The bias is added after the rounding, in the result's type.
// CHECK-LABEL: func.func @conv_bf16
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<1x1x4x2x2xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %arg2 : tensor<1x4x2x2xbf16>, tensor<4xbf16>)
// CHECK: arith.addf %{{.*}}, %{{.*}} : bf16
func.func @conv_bf16(%x: tensor<1x3x4x4xbf16>, %w: tensor<4x3x3x3xbf16>, %b: tensor<4xbf16>) -> tensor<1x4x2x2xbf16> {
  %0 = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x4x4xbf16>, tensor<4x3x3x3xbf16>, tensor<4xbf16>) -> tensor<1x4x2x2xbf16>
  return %0 : tensor<1x4x2x2xbf16>
}

// f32 contractions are unchanged by the partials type.
// CHECK-LABEL: func.func @matmul_f32
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @matmul_f32(%x: tensor<3x4xf32>, %w: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = graph.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Half partials (PopTorch's setPartialsType(torch.float16)) are the
// matmuls' and convolutions' only: sums still add in f32 (a batch norm's
// statistics in fp16 pass its range, and training diverges).
// CHECK-LABEL: func.func @half_partials
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f16
// CHECK: linalg.fill ins(%[[ZERO]] : f16) outs(%{{.*}} : tensor<3x2xf16>)
// CHECK: ^bb0(%[[A:.*]]: f16, %[[B:.*]]: f16, %[[OUT:.*]]: f16):
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f16
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[OUT]], %[[P]] : f16
// CHECK-NOT: arith.truncf
// CHECK: return
// CHECK-LABEL: func.func @half_partials_sum
// CHECK: linalg.reduce ins(%arg0 : tensor<4x8xf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.addf %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK-LABEL: func.func @half_partials_softmax
// CHECK: linalg.reduce ins(%{{.*}} : tensor<2x8xf16>) outs(%{{.*}} : tensor<2xf32>)
module attributes {graph.partials_type = f16} {
  func.func @half_partials(%x: tensor<3x4xf16>, %w: tensor<4x2xf16>) -> tensor<3x2xf16> {
    %0 = graph.matmul %x, %w : (tensor<3x4xf16>, tensor<4x2xf16>) -> tensor<3x2xf16>
    return %0 : tensor<3x2xf16>
  }
  func.func @half_partials_sum(%x: tensor<4x8xf16>) -> tensor<4xf16> {
    %0 = graph.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf16>) -> tensor<4xf16>
    return %0 : tensor<4xf16>
  }
  func.func @half_partials_softmax(%x: tensor<2x8xf16>) -> tensor<2x8xf16> {
    %0 = graph.softmax %x {axis = 1 : i64} : tensor<2x8xf16>
    return %0 : tensor<2x8xf16>
  }
}

// -----

// Sums of fp16 values add in f32 too: a mean divides there and rounds once
// (a batch norm's statistics over N x H x W pass fp16's range as sums, not
// as means).
// CHECK-LABEL: func.func @mean_f16
// CHECK: %[[SUM:.*]] = linalg.reduce ins(%arg0 : tensor<4x8xf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.addf %{{.*}} : f32
// CHECK: arith.divf %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @mean_f16(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  %0 = graph.reduce_mean %x {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf16>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// A layer norm: the mean summed in f32 and rounded (the model subtracts it
// in fp16); the squares, their mean, epsilon and the reciprocal square
// root in f32 (a square passes fp16's range past 256, and an epsilon of
// 1e-12 is 0 in fp16); the result rounded once.
// CHECK-LABEL: func.func @layer_norm_f16
// CHECK: linalg.reduce ins(%{{.*}} : tensor<2x8xf16>) outs(%{{.*}} : tensor<2xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: arith.subf %{{.*}} : f16
// CHECK: arith.mulf %{{.*}} : f32
// CHECK: arith.constant 9.99{{[0-9]+}}E-13 : f32
// CHECK: linalg.reduce {{.*}}ins(%{{.*}} : tensor<2x8xf32>) outs(%{{.*}} : tensor<2xf32>)
// CHECK: math.rsqrt %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK-NOT: linalg.reduce
// CHECK: return
func.func @layer_norm_f16(%x: tensor<2x8xf16>, %s: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<2x8xf16> {
  %0 = graph.layer_norm %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-12 : f64} : (tensor<2x8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<2x8xf16>
  return %0 : tensor<2x8xf16>
}

// A softmax's denominator is summed and divided by in f32; each
// probability is rounded once.
// CHECK-LABEL: func.func @softmax_f16
// CHECK: linalg.reduce ins(%{{.*}} : tensor<2x8xf16>) outs(%{{.*}} : tensor<2xf32>)
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.divf %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @softmax_f16(%x: tensor<2x8xf16>) -> tensor<2x8xf16> {
  %0 = graph.softmax %x {axis = 1 : i64} : tensor<2x8xf16>
  return %0 : tensor<2x8xf16>
}
