// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// ResNet-50's layer3.0 conv2 (3x3, stride 2, 256 -> 256 channels, 14x14
// output) on an ipu2. The planner takes the fewest slices of input
// channels whose estimate is within 3% of the cheapest (each slice is an
// output-sized partial sum written, exchanged and added). With the weight
// spread over the tiles that read it, 32 slices cost 13,214 cycles on the
// device; the 16 this test expected while the weight sat on the first
// row of tiles cost 20,708 (its holders sent 13,279 cycles of exchange).

// CHECK: ipu.compute_set "cs0" {{.*}} inits(%{{.*}} : tensor<32x1x256x14x14xf32>)
// CHECK: ipu.compute_set "cs1" ins(%{{.*}} : tensor<32x1x256x14x14xf32>)
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 1472, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<1x256x30x30xf32>, %w: tensor<256x256x3x3xf32>) -> tensor<1x256x14x14xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x256x14x14xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x256x14x14xf32>) -> tensor<1x256x14x14xf32>
    %y = linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x256x30x30xf32>, tensor<256x256x3x3xf32>) outs(%init : tensor<1x256x14x14xf32>) -> tensor<1x256x14x14xf32>
    return %y : tensor<1x256x14x14xf32>
  }
}
