// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// Every op parses, verifies and prints back to something that parses again.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<2x3xi64>,
                       %c: tensor<2x3xi1>) -> tensor<2x3xf32> {
  // CHECK: graph.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = graph.sub %0, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = graph.mul %1, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = graph.div %2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = graph.pow %3, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = graph.max %4, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = graph.min %5, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = graph.rem %6, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.less %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %8 = graph.less %7, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %9 = graph.and %8, %c : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %10 = graph.not %9 : tensor<2x3xi1>
  // CHECK: graph.select
  %11 = graph.select %10, %7, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %12 = graph.exp %11 : tensor<2x3xf32>
  %13 = graph.sigmoid %12 : tensor<2x3xf32>
  %14 = graph.erf %13 : tensor<2x3xf32>
  // CHECK: graph.clamp %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64}
  %15 = graph.clamp %14 {min = 0.0 : f64, max = 6.0 : f64} : tensor<2x3xf32>
  %16 = graph.hard_sigmoid %15 {alpha = 0.2 : f64, beta = 0.5 : f64} : tensor<2x3xf32>
  %17 = graph.leaky_relu %16 {alpha = 0.01 : f64} : tensor<2x3xf32>
  %18 = graph.hard_swish %17 : tensor<2x3xf32>
  // CHECK: graph.cast %{{.*}} : tensor<2x3xi64> to tensor<2x3xf32>
  %19 = graph.cast %i : tensor<2x3xi64> to tensor<2x3xf32>
  %20 = graph.add %18, %19 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %20 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<1x4x8x8xf32>, %w: tensor<8x1x3x3xf32>, %bias: tensor<8xf32>,
              %m: tensor<4x8x16xf32>, %n: tensor<16x5xf32>, %g: tensor<5xf32>) -> (tensor<1x8x2x2xf32>, tensor<4x8x5xf32>) {
  // CHECK: graph.conv {{.*}}groups = 4
  %0 = graph.conv %x, %w, %bias {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 4} : (tensor<1x4x8x8xf32>, tensor<8x1x3x3xf32>, tensor<8xf32>) -> tensor<1x8x4x4xf32>
  %1 = graph.batch_norm %0, %bias, %bias, %bias, %bias {epsilon = 1.0e-5 : f64} : (tensor<1x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x4x4xf32>
  %2 = graph.relu %1 : tensor<1x8x4x4xf32>
  // CHECK: graph.max_pool
  %3 = graph.max_pool %2 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x8x4x4xf32>) -> tensor<1x8x2x2xf32>
  %4 = graph.avg_pool %3 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false, count_include_pad = false} : (tensor<1x8x2x2xf32>) -> tensor<1x8x2x2xf32>
  %5 = graph.group_norm %4, %bias, %bias {num_groups = 4, epsilon = 1.0e-5 : f64} : (tensor<1x8x2x2xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x2x2xf32>
  // CHECK: graph.matmul {{.*}} -> tensor<4x8x5xf32>
  %6 = graph.matmul %m, %n : (tensor<4x8x16xf32>, tensor<16x5xf32>) -> tensor<4x8x5xf32>
  %7 = graph.softmax %6 {axis = 2} : tensor<4x8x5xf32>
  %8 = graph.layer_norm %7, %g, %g {axis = 2, epsilon = 1.0e-5 : f64} : (tensor<4x8x5xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<4x8x5xf32>
  return %5, %8 : tensor<1x8x2x2xf32>, tensor<4x8x5xf32>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %idx: tensor<5xi64>, %gi: tensor<2x3x2xi64>) -> tensor<2x5x4xf32> {
  %0 = graph.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = graph.reshape %0 : tensor<4x2x3xf32> -> tensor<8x3xf32>
  %2 = graph.slice %1 {starts = array<i64: 7, 0>, limits = array<i64: -1, 3>, strides = array<i64: -2, 1>} : tensor<8x3xf32> -> tensor<4x3xf32>
  %3 = graph.concat %2, %2 {axis = 0} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  // CHECK: graph.pad {{.*}}#graph<pad_mode reflect>
  %4 = graph.pad %3 {pads_low = array<i64: 1, 0>, pads_high = array<i64: 1, 2>, mode = #graph<pad_mode reflect>, value = 0.0 : f64} : tensor<8x3xf32> -> tensor<10x5xf32>
  %5 = graph.expand %4 : tensor<10x5xf32> -> tensor<2x10x5xf32>
  %6 = graph.reduce_sum %5 {axes = array<i64: 0>, keepdims = false} : (tensor<2x10x5xf32>) -> tensor<10x5xf32>
  %7 = graph.argmax %6 {axis = 1, keepdims = false, select_last_index = false} : (tensor<10x5xf32>) -> tensor<10xi64>
  // CHECK: graph.gather_elements {{.*}} -> tensor<2x3x2xf32>
  %ge = graph.gather_elements %x, %gi {axis = 2} : (tensor<2x3x4xf32>, tensor<2x3x2xi64>) -> tensor<2x3x2xf32>
  // CHECK: graph.gather {{.*}} -> tensor<2x5x4xf32>
  %8 = graph.gather %x, %idx {axis = 1} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  %9 = graph.resize %8 {scales = array<f64: 1.0, 1.0, 1.0>, mode = #graph<resize_mode linear>, coordinate_transform = #graph<coordinate_transform half_pixel>, nearest_mode = #graph<nearest_mode floor>, cubic_coeff_a = -0.75 : f64, exclude_outside = false} : tensor<2x5x4xf32> -> tensor<2x5x4xf32>
  return %9 : tensor<2x5x4xf32>
}

// CHECK-LABEL: func.func @weights
ml_program.global private @w(dense<1.0> : tensor<4xf16>) : tensor<4xf16>
func.func @weights() -> tensor<4xbf16> {
  // CHECK: ml_program.global_load_const @w
  %0 = ml_program.global_load_const @w : tensor<4xf16>
  %1 = graph.cast %0 : tensor<4xf16> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}
