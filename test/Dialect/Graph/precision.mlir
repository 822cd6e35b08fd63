// RUN: tessera-opt %s --graph-precision="precision=fp16.16" | FileCheck %s
// RUN: tessera-opt %s --graph-precision | FileCheck %s --check-prefix=FP32
// RUN: tessera-opt %s --graph-precision="precision=fp16.32" | FileCheck %s --check-prefix=FP1632
// RUN: tessera-opt %s --graph-precision="precision=fp16.32 partials-type=float" | FileCheck %s --check-prefix=FP1632
// RUN: tessera-opt %s --graph-precision="partials-type=half" | FileCheck %s --check-prefix=HALF
//
// fp16.16: weights stored in f16 (rounded to nearest), constants and every
// op's result f16; the signature stays f32, cast on entry and on return.
// The partials type is recorded on the module: half for fp16.16, float for
// fp16.32 and fp32, or what partials-type says.

// CHECK: module attributes {graph.partials_type = f16}
// CHECK: ml_program.global private @w(dense<{{\[}}[1.000000e+00, 3.332520e-01]]> : tensor<1x2xf16>) : tensor<1x2xf16>
// CHECK-LABEL: func.func @main(%arg0: tensor<3x1xf32>, %arg1: tensor<3xi64>) -> (tensor<3x2xf32>, tensor<3xi64>)
// CHECK: %[[X:.*]] = graph.cast %arg0 : tensor<3x1xf32> to tensor<3x1xf16>
// CHECK: graph.constant dense<5.000000e-01> : tensor<f16>
// CHECK: %[[W:.*]] = ml_program.global_load_const @w : tensor<1x2xf16>
// CHECK: %[[M:.*]] = graph.matmul %[[X]], %[[W]] : (tensor<3x1xf16>, tensor<1x2xf16>) -> tensor<3x2xf16>
// CHECK: %[[S:.*]] = graph.mul %[[M]], %{{.*}} : (tensor<3x2xf16>, tensor<f16>) -> tensor<3x2xf16>
// CHECK: %[[Y:.*]] = graph.cast %[[S]] : tensor<3x2xf16> to tensor<3x2xf32>
// CHECK: return %[[Y]], %arg1
// FP32: module attributes {graph.partials_type = f32}
// FP32-NOT: f16
// FP1632: module attributes {graph.partials_type = f32}
// FP1632: graph.matmul %{{.*}}, %{{.*}} : (tensor<3x1xf16>, tensor<1x2xf16>) -> tensor<3x2xf16>
// HALF: module attributes {graph.partials_type = f16}
// HALF: graph.matmul %{{.*}}, %{{.*}} : (tensor<3x1xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
ml_program.global private @w(dense<[[1.0, 0.3333333]]> : tensor<1x2xf32>) : tensor<1x2xf32>
func.func @main(%x: tensor<3x1xf32>, %i: tensor<3xi64>) -> (tensor<3x2xf32>, tensor<3xi64>) {
  %h = graph.constant dense<0.5> : tensor<f32>
  %w = ml_program.global_load_const @w : tensor<1x2xf32>
  %0 = graph.matmul %x, %w : (tensor<3x1xf32>, tensor<1x2xf32>) -> tensor<3x2xf32>
  %1 = graph.mul %0, %h : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  return %1, %i : tensor<3x2xf32>, tensor<3xi64>
}
