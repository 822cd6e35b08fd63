// RUN: tessera-opt %s --ipu-prepare-for-mapping --canonicalize --cse --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// A matmul of a zero constant: CSE makes the zero fill both its left
// operand and its accumulator's init. One value cannot hold two regions
// on the same tiles, so ipu-map-tiles gives the init its own fill first
// (it used to stop with "init region ... differs (internal error)"). That
// fill is then done by the matmul's vertices (the init is only memory).

// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = ipu.compute_set "cs0"
// CHECK: %[[INIT:.*]] = ipu.alloc
// CHECK: ipu.compute_set "cs1" ins(%[[A]], %arg0 : tensor<3x4xf32>, tensor<4x4xf32>) inits(%[[INIT]] : tensor<3x4xf32>)
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%w: tensor<4x4xf32>) -> tensor<3x4xf32> {
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : tensor<3x4xf32>
    %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<3x4xf32>) -> tensor<3x4xf32>
    %y = linalg.matmul ins(%fill, %w : tensor<3x4xf32>, tensor<4x4xf32>) outs(%fill : tensor<3x4xf32>) -> tensor<3x4xf32>
    return %y : tensor<3x4xf32>
  }
}
