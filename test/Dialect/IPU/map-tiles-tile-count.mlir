// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// On a chip of 23 tiles (an IPU2's 1472 is 64 x 23), a matmul's 512 rows go
// in 23 pieces of 23 rows, one per tile, rather than in the 16 pieces of 32
// a power-of-two split gives, which leave 7 tiles idle.

// CHECK-LABEL: func.func @main
// CHECK: ipu.compute_set "cs0" {{.*}} mapping <chunks = [23, 4], tile_strides = [1, 0], first_tile = 0>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 23, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<512x16xf32>, %w: tensor<16x4xf32>) -> tensor<512x4xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<512x4xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<512x4xf32>) -> tensor<512x4xf32>
    %y = linalg.matmul ins(%x, %w : tensor<512x16xf32>, tensor<16x4xf32>) outs(%init : tensor<512x4xf32>) -> tensor<512x4xf32>
    return %y : tensor<512x4xf32>
  }
}
