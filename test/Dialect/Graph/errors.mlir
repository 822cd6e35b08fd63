// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @broadcast_mismatch(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes do not broadcast: 2x3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{input has 3 channels but weight 4x2x3x3 with 1 groups expects 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_window(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{spatial dim 0 of size 2 (padded by 0+0) is smaller than the window of 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @conv_attrs(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{expected 2 strides and dilations and 4 pads, got 2, 2 and 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_int(%x: tensor<1x3x8x8xi32>, %w: tensor<4x3x3x3xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of}}
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xi32>, tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contracting dims differ: lhs 2x3 vs rhs 4x5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape 2x3 (6 elements) to 7 (7 elements)}}
  %0 = graph.reshape %a : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @expand_bad(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast 2x3 to 4x3}}
  %0 = graph.expand %a : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{perm must be a permutation of 0..1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.transpose %a {perm = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_range(%a: tensor<4xf32>) {
  // expected-error @+2 {{slice [5:6:1] is out of range for dim 0 of size 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.slice %a {starts = array<i64: 5>, limits = array<i64: 6>, strides = array<i64: 1>} : tensor<4xf32> -> tensor<1xf32>
  return
}

// -----

func.func @reduce_axes(%a: tensor<4x5xf32>) {
  // expected-error @+2 {{reduction axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.reduce_sum %a {axes = array<i64: 2>, keepdims = false} : (tensor<4x5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<4x5xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = graph.softmax %a {axis = 2} : tensor<4x5xf32>
  return
}

// -----

func.func @clamp_bounds(%a: tensor<4xf32>) {
  // expected-error @+1 {{min bound 2.000000e+00 exceeds max bound 1.000000e+00}}
  %0 = graph.clamp %a {min = 2.0 : f64, max = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @pool_pad(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{pad 2 must be smaller than kernel 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 2, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x1x4x4xf32>) -> tensor<1x1x5x3xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{concat inputs 2x3 and 2x4 differ in dim 1 (axis is 0)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.concat %a, %b {axis = 0} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @batch_norm_channels(%x: tensor<1x3x4x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+2 {{per-channel operand must have shape 3, got 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f64} : (tensor<1x3x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x3x4x4xf32>
  return
}

// -----

func.func @gather_elements_rank(%x: tensor<3x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{indices 3 must have the rank of the input 3x4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.gather_elements %x, %i {axis = 1} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @random_seed_not_scalar(%seed: tensor<2xi64>, %counter: tensor<i64>) {
  // expected-error @+1 {{seed and counter must be 0-d i64 tensors, got 'tensor<2xi64>'}}
  %0 = graph.random_uniform %seed, %counter {stream = 0 : i64, low = 0.0 : f64, high = 1.0 : f64} : (tensor<2xi64>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @random_empty_range(%seed: tensor<i64>, %counter: tensor<i64>) {
  // expected-error @+1 {{needs low < high}}
  %0 = graph.random_uniform %seed, %counter {stream = 0 : i64, low = 1.0 : f64, high = 1.0 : f64} : (tensor<i64>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @scatter_add_shape(%u: tensor<5x4xf32>, %i: tensor<6xi64>) {
  // expected-error @+1 {{updates 'tensor<5x4xf32>' must have the shape of the result's dims before axis 0, the indices' and the result's after it}}
  %0 = graph.scatter_add %u, %i {axis = 0 : i64} : (tensor<5x4xf32>, tensor<6xi64>) -> tensor<10x4xf32>
  return
}

// -----

func.func @scatter_add_axis(%u: tensor<5x4xf32>, %i: tensor<5xi64>) {
  // expected-error @+1 {{axis 2 is out of range for a rank-2 result}}
  %0 = graph.scatter_add %u, %i {axis = 2 : i64} : (tensor<5x4xf32>, tensor<5xi64>) -> tensor<10x4xf32>
  return
}

// -----

func.func @scatter_add_type(%u: tensor<5x4xf16>, %i: tensor<5xi64>) {
  // expected-error @+1 {{differ in element type}}
  %0 = graph.scatter_add %u, %i {axis = 0 : i64} : (tensor<5x4xf16>, tensor<5xi64>) -> tensor<10x4xf32>
  return
}

// -----

func.func @stochastic_round_types(%x: tensor<4xf16>, %s: tensor<i64>) {
  // expected-error @+1 {{rounds f32 to f16, got 'tensor<4xf16>' to 'tensor<4xf16>'}}
  %0 = graph.stochastic_round %x, %s, %s {stream = 0 : i64} : (tensor<4xf16>, tensor<i64>, tensor<i64>) -> tensor<4xf16>
  return
}

// -----

func.func @stochastic_round_shape(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{keeps the shape}}
  %0 = graph.stochastic_round %x, %s, %s {stream = 0 : i64} : (tensor<4xf32>, tensor<i64>, tensor<i64>) -> tensor<2xf16>
  return
}

// -----

func.func @stochastic_round_seed(%x: tensor<4xf32>, %s: tensor<2xi64>) {
  // expected-error @+1 {{seed and counter must be 0-d i64 tensors}}
  %0 = graph.stochastic_round %x, %s, %s {stream = 0 : i64} : (tensor<4xf32>, tensor<2xi64>, tensor<2xi64>) -> tensor<4xf16>
  return
}

// -----

func.func @cross_replica_sum_changes_type(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @below {{result type 'tensor<2xf32>' differs from its input's 'tensor<4xf32>'}}
  %s = graph.cross_replica_sum %x : tensor<4xf32> -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// A maximum over nothing has no value (a sum over nothing is 0).
func.func @reduce_max_over_nothing(%x: tensor<2x0x3xf32>) {
  // expected-error @+2 {{reduces over dimension 1 of 2x0x3, which is empty: a maximum over no elements has no value}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.reduce_max %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x0x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_min_over_nothing(%x: tensor<0x4xf32>) {
  // expected-error @+2 {{reduces over dimension 0 of 0x4, which is empty: a minimum over no elements has no value}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = graph.reduce_min %x {axes = array<i64: 0>, keepdims = true} : (tensor<0x4xf32>) -> tensor<1x4xf32>
  return
}

// -----

// Into an empty result there is nothing to compute: no error.
func.func @reduce_max_into_nothing(%x: tensor<0x4xf32>) -> tensor<0xf32> {
  %0 = graph.reduce_max %x {axes = array<i64: 1>, keepdims = false} : (tensor<0x4xf32>) -> tensor<0xf32>
  return %0 : tensor<0xf32>
}
