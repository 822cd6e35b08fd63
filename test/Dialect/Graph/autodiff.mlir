// RUN: tessera-opt %s --split-input-file --graph-autodiff | FileCheck %s --enable-var-scope
//
// graph-autodiff returns one gradient per trainable global, marked
// graph.gradient_of; a matmul's weight gradient is lhs^T @ grad, a bias's
// the sum over the broadcast dimension.

// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.loss}, tensor<3x2xf32> {graph.gradient_of = @w, graph.name = "w.grad"}, tensor<2xf32> {graph.gradient_of = @b, graph.name = "b.grad"})
// CHECK-DAG: %[[XT:.*]] = graph.transpose %arg0 {graph.backward, perm = array<i64: 1, 0>}
// CHECK-DAG: %[[GW:.*]] = graph.matmul %[[XT]], %{{.*}} {graph.backward} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
// CHECK-DAG: %[[GB0:.*]] = graph.reduce_sum %{{.*}} {axes = array<i64: 0>, graph.backward, keepdims = true} : (tensor<4x2xf32>) -> tensor<1x2xf32>
// CHECK-DAG: %[[GB:.*]] = graph.reshape %[[GB0]] {graph.backward} : tensor<1x2xf32> -> tensor<2xf32>
// CHECK: return %{{.*}}, %[[GW]], %[[GB]]
ml_program.global private @w(dense<1.0> : tensor<3x2xf32>) : tensor<3x2xf32>
ml_program.global private @b(dense<0.5> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<4x3xf32>) -> (tensor<f32> {graph.loss}) {
  %w = ml_program.global_load_const @w : tensor<3x2xf32>
  %b = ml_program.global_load_const @b : tensor<2xf32>
  %0 = graph.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %1 = graph.add %0, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %2 = graph.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x2xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// A frozen weight gets no gradient; the relu's gradient selects on x > 0.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.loss}, tensor<2xf32> {graph.gradient_of = @v, graph.name = "v.grad"})
// CHECK: graph.greater
// CHECK: graph.select
ml_program.global private @v(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}) {
  %v = ml_program.global_load_const @v : tensor<2xf32>
  %0 = graph.mul %x, %v : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = graph.relu %0 : tensor<2xf32>
  %2 = graph.reduce_sum %1 {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Batch norm with the batch's statistics (training mode): the gradient also
// flows through the mean (negated, summed per channel) and the variance
// (-rstd^3 / 2) into the ops that computed them, so x's gradient reaches w
// three ways. Running statistics read from a global are constants instead.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<2xf32> {graph.gradient_of = @w, graph.name = "w.grad"}
// CHECK-NOT: gradient_of = @running
// CHECK-DAG: graph.neg %{{.*}} {graph.backward} : tensor<1x2xf32>
// CHECK-DAG: graph.constant dense<-5.000000e-01>
ml_program.global private @w(dense<1.5> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @running(dense<0.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<3x2xf32>) -> (tensor<f32> {graph.loss}) {
  %w = ml_program.global_load_const @w : tensor<2xf32>
  %r = ml_program.global_load_const @running : tensor<2xf32>
  %one = graph.constant dense<1.0> : tensor<2xf32>
  %zero = graph.constant dense<0.0> : tensor<2xf32>
  %0 = graph.mul %x, %w : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %m = graph.reduce_mean %0 {axes = array<i64: 0>, keepdims = false} : (tensor<3x2xf32>) -> tensor<2xf32>
  %c = graph.sub %0, %m : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %s = graph.mul %c, %c : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %v = graph.reduce_mean %s {axes = array<i64: 0>, keepdims = false} : (tensor<3x2xf32>) -> tensor<2xf32>
  %1 = graph.batch_norm %0, %one, %zero, %m, %v {epsilon = 1.0e-5 : f64} : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %2 = graph.batch_norm %1, %one, %zero, %r, %one {epsilon = 1.0e-5 : f64} : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %3 = graph.mul %2, %x : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %4 = graph.reduce_sum %3 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<3x2xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}

// -----

// An embedding's gradient: the gather's table gets the scatter-add of the
// output's gradient at the same indices; the indices get none.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.loss}, tensor<10x4xf32> {graph.gradient_of = @table, graph.name = "table.grad"})
// CHECK: %[[G:.*]] = graph.scatter_add %{{.*}}, %arg0 {axis = 0 : i64, graph.backward} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
// CHECK: return %{{.*}}, %[[G]]
ml_program.global private @table(dense<1.0> : tensor<10x4xf32>) : tensor<10x4xf32>
func.func @main(%ids: tensor<2x3xi64>) -> (tensor<f32> {graph.loss}) {
  %t = ml_program.global_load_const @table : tensor<10x4xf32>
  %0 = graph.gather %t, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = graph.mul %0, %0 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = graph.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// No element of an empty result depends on its operands: their gradients
// are zeros and no rule runs (a pooling's gradient is a depthwise
// transposed convolution whose groups are the channels, here none:
// tessera-fuzz-compile, seed 140654); a weight reached only through empty
// tensors gets a zero gradient, as autograd gives it.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<5xf32> {graph.gradient_of = @e, graph.name = "e.grad"}
// CHECK-SAME: tensor<5xf32> {graph.gradient_of = @u, graph.name = "u.grad"}
// CHECK-NOT: graph.avg_pool {{.*}}graph.backward
ml_program.global private @e(dense<1.0> : tensor<5xf32>) : tensor<5xf32>
ml_program.global private @u(dense<1.0> : tensor<5xf32>) : tensor<5xf32>
func.func @main(%x: tensor<7x0x3x5xf32>, %y: tensor<5xf32>) -> (tensor<f32> {graph.loss}) {
  %e = ml_program.global_load_const @e : tensor<5xf32>
  %u = ml_program.global_load_const @u : tensor<5xf32>
  %0 = graph.mul %x, %e : (tensor<7x0x3x5xf32>, tensor<5xf32>) -> tensor<7x0x3x5xf32>
  %1 = graph.avg_pool %0 {kernel_shape = array<i64: 2, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false, count_include_pad = false} : (tensor<7x0x3x5xf32>) -> tensor<7x0x2x3xf32>
  %2 = graph.reduce_sum %1 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : (tensor<7x0x2x3xf32>) -> tensor<f32>
  %3 = graph.mul %y, %u : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %4 = graph.reduce_sum %3 {axes = array<i64: 0>, keepdims = false} : (tensor<5xf32>) -> tensor<f32>
  %5 = graph.add %2, %4 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %5 : tensor<f32>
}

// -----

// gather_elements' gradient: a one-hot of the indices times the result's
// gradient, summed over the axis, the axis back in its place, padded where
// the indices cover less of the input (the axis is last here: no
// transpose).
// CHECK-LABEL: func.func @main
// CHECK: graph.gather_elements
// CHECK: %[[EQ:.*]] = graph.equal {{.*}} -> tensor<2x2x5xi1>
// CHECK: graph.reduce_sum {{.*}}axes = array<i64: 1>{{.*}} -> tensor<2x5xf32>
// CHECK: %[[G:.*]] = graph.pad {{.*}} -> tensor<3x5xf32>
// CHECK: return %{{.*}}, %[[G]]
ml_program.global private @w(dense<1.0> : tensor<3x5xf32>) : tensor<3x5xf32>
func.func @main(%ids: tensor<2x2xi64>) -> (tensor<f32> {graph.loss}) {
  %w = ml_program.global_load_const @w : tensor<3x5xf32>
  %0 = graph.gather_elements %w, %ids {axis = 1 : i64} : (tensor<3x5xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  %1 = graph.mul %0, %0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %2 = graph.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : (tensor<2x2xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
