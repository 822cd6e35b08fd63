// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// RUN: tessera-opt %s --emit-bytecode | tessera-opt | FileCheck %s
// A scalar's mapping has no dimensions: its empty lists print and parse back,
// in text and through bytecode (which stores the attribute as its text).

// CHECK: ipu.alloc <chunks = [], tile_strides = [], first_tile = 5> : tensor<f32>
// CHECK: ipu.alloc <chunks = [3], tile_strides = [1], first_tile = 0> : tensor<6xf32>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 8, bytes_per_tile = 638976>} {
  func.func @main() -> (tensor<f32>, tensor<6xf32>) {
    %s = ipu.alloc <chunks = [], tile_strides = [], first_tile = 5> : tensor<f32>
    %v = ipu.alloc <chunks = [3], tile_strides = [1], first_tile = 0> : tensor<6xf32>
    return %s, %v : tensor<f32>, tensor<6xf32>
  }
}
