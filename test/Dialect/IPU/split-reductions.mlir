// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// A matmul with a long reduction (k = 2048) and a small output (4x8) on 16
// tiles: computing each output element whole on one tile would leave most
// tiles idle and move all of x and w to a few. The planner splits k into 16
// slices of 128: 16 partial results [16x4x8] from zeros, each on its own
// tile next to its slices of x and w, then one step adds them into the
// matmul's init. Neither zero fill is a step of its own: the vertices that
// accumulate into them fill their pieces first.

// The operands are placed by slice of k, one slice per tile.
// CHECK: func.func @main(%{{.*}}: tensor<4x2048xf32> {ipu.mapping = #ipu.mapping<chunks = [4, 128], tile_strides = [0, 1], first_tile = 0>})
// CHECK: ml_program.global_load_const @w : tensor<2048x8xf32> {ipu.mapping = #ipu.mapping<chunks = [128, 8], tile_strides = [1, 0], first_tile = 0>}
// CHECK: %[[INIT:.*]] = ipu.alloc <chunks = [1, 2], tile_strides = [4, 1], first_tile = 0> : tensor<4x8xf32>
// CHECK: %[[ZEROS:.*]] = ipu.alloc <chunks = [1, 4, 8], tile_strides = [1, 0, 0], first_tile = 0> : tensor<16x4x8xf32>
// Loops (m, n, k', s): x[m, k' + 128 s], w[k' + 128 s, n] into partial[s, m, n].
// CHECK: %[[PARTIAL:.*]] = ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}} : tensor<4x2048xf32>, tensor<2048x8xf32>) inits(%[[ZEROS]] : tensor<16x4x8xf32>) loops [4, 8, 128, 16] outputs [3, 0, 1]
// CHECK-SAME: macs 65536 mapping <chunks = [1, 4, 8], tile_strides = [1, 0, 0], first_tile = 0> : tensor<16x4x8xf32>
// CHECK: ipu.compute_set "cs1" ins(%[[PARTIAL]] : tensor<16x4x8xf32>) inits(%[[INIT]] : tensor<4x8xf32>) loops [4, 8, 16] outputs [0, 1]
// The partial kernel reads one slice, x[4x128] and w[128x8] (its sizes,
// the slice's 128 included, from the descriptors), and zeros its piece
// before accumulating into it.
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %[[OUT:.*]]: memref<?x?x?xf32>
// CHECK: %[[PIECE:.*]] = bufferization.to_tensor %[[OUT]]
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[FILLED:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[PIECE]] : tensor<?x?x?xf32>)
// CHECK: linalg.generic {{.*}} outs(%[[FILLED]] : tensor<?x?x?xf32>)
// The combining kernel zeros the output piece, then adds the 16 partials.
// CHECK-LABEL: func.func @vertex_cs1_0
// CHECK: linalg.fill
// CHECK: arith.addf
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  ml_program.global private @w(dense<1.0> : tensor<2048x8xf32>) : tensor<2048x8xf32>
  func.func @main(%x: tensor<4x2048xf32>) -> tensor<4x8xf32> {
    %zero = arith.constant 0.0 : f32
    %w = ml_program.global_load_const @w : tensor<2048x8xf32>
    %e = tensor.empty() : tensor<4x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = linalg.matmul ins(%x, %w : tensor<4x2048xf32>, tensor<2048x8xf32>) outs(%init : tensor<4x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
