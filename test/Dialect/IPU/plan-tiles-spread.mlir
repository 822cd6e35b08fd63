// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles | FileCheck %s --check-prefix=PLAN
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// A 3x3 convolution's input is read by every output piece, each with a
// halo: it is spread over the tiles that read it (9 x 9 pixels of every
// channel per tile, on the tiles of the output's 8 x 8 squares), not held
// whole by tile 0, which would then send all of it to the 15 others (on an
// ipu2 a 1x8x34x34 input held by one tile took 33,191 exchange cycles;
// spread, 1,119). The weight (2,304 bytes) is too small to spread.

// PLAN-LABEL: func.func @main
// PLAN-SAME: ipu.mapping = #ipu.mapping<chunks = [1, 8, 9, 9], tile_strides = [0, 0, 4, 1], first_tile = 0>
// PLAN-SAME: ipu.mapping = #ipu.mapping<chunks = [8, 8, 3, 3], tile_strides = [0, 0, 0, 0], first_tile = 0>
// CHECK-LABEL: func.func @main
// CHECK: ipu.compute_set "cs0" {{.*}} mapping <chunks = [1, 8, 8, 8], tile_strides = [0, 0, 4, 1], first_tile = 0>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<1x8x34x34xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<1x8x32x32xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x8x32x32xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
    %y = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x8x34x34xf32>, tensor<8x8x3x3xf32>) outs(%init : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
    return %y : tensor<1x8x32x32xf32>
  }
}
