// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// A vertex sets its inner loop up again for each row of its output (the
// target's vertexCyclesPerRow). On 16 tiles, a 3x3 convolution's 32x32
// output goes in pieces of 4 rows of 16, not in the 8x8 squares that
// receive the least halo but make each vertex run 8 short rows per channel.

// CHECK-LABEL: func.func @main
// CHECK: ipu.compute_set "cs0" {{.*}} mapping <chunks = [1, 8, 4, 16], tile_strides = [0, 0, 2, 1], first_tile = 0>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<1x8x34x34xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<1x8x32x32xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x8x32x32xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
    %y = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x8x34x34xf32>, tensor<8x8x3x3xf32>) outs(%init : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
    return %y : tensor<1x8x32x32xf32>
  }
}
