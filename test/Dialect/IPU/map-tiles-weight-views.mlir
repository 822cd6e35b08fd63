// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles --split-input-file | FileCheck %s

// A weight read through a view that only adds a unit dimension (a
// convolution's weight with its group dimension) is placed by its reader's
// plan, like a weight read directly: each piece on the tile of the vertices
// reading it (here the output's columns, 4 per tile), not spread linearly
// over its rows. The compute set reads the view of it.

// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = ml_program.global_load_const @w : tensor<32x64xf32> {ipu.mapping = #ipu.mapping<chunks = [32, 4], tile_strides = [0, 1], first_tile = 0>}
// CHECK: %[[V:.*]] = ipu.view %[[W]] : tensor<32x64xf32> to tensor<1x32x64xf32>
// CHECK: ipu.compute_set "cs0" ins(%{{.*}}, %[[V]] : tensor<8x32xf32>, tensor<1x32x64xf32>) {{.*}} mapping <chunks = [1, 8, 4], tile_strides = [0, 0, 1], first_tile = 0>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  ml_program.global private @w(dense<1.0> : tensor<32x64xf32>) : tensor<32x64xf32>
  func.func @main(%x: tensor<8x32xf32>) -> tensor<1x8x64xf32> {
    %zero = arith.constant 0.0 : f32
    %w = ml_program.global_load_const @w : tensor<32x64xf32>
    %wv = tensor.expand_shape %w [[0, 1], [2]] output_shape [1, 32, 64] : tensor<32x64xf32> into tensor<1x32x64xf32>
    %e = tensor.empty() : tensor<1x8x64xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(g, n, m, k) -> (n, k)>, affine_map<(g, n, m, k) -> (g, k, m)>, affine_map<(g, n, m, k) -> (g, n, m)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%x, %wv : tensor<8x32xf32>, tensor<1x32x64xf32>) outs(%init : tensor<1x8x64xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x8x64xf32>
    return %y : tensor<1x8x64xf32>
  }
}

// -----

// The same view read by two ops: the first one's plan places the weight,
// the second reads it where it is (no second copy of the weight).

// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]] = ml_program.global_load_const @w : tensor<32x64xf32> {ipu.mapping = #ipu.mapping<chunks = [32, 4], tile_strides = [0, 1], first_tile = 0>}
// CHECK: %[[V:.*]] = ipu.view %[[W]]
// CHECK-COUNT-2: ipu.compute_set "{{cs[0-9]+}}" ins(%{{[a-z0-9]+}}, %[[V]] : {{.*}}) inits(
// CHECK-NOT: global_load_const
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  ml_program.global private @w(dense<1.0> : tensor<32x64xf32>) : tensor<32x64xf32>
  func.func @main(%x: tensor<8x32xf32>, %x2: tensor<8x32xf32>) -> (tensor<1x8x64xf32>, tensor<1x8x64xf32>) {
    %zero = arith.constant 0.0 : f32
    %w = ml_program.global_load_const @w : tensor<32x64xf32>
    %wv = tensor.expand_shape %w [[0, 1], [2]] output_shape [1, 32, 64] : tensor<32x64xf32> into tensor<1x32x64xf32>
    %e = tensor.empty() : tensor<1x8x64xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(g, n, m, k) -> (n, k)>, affine_map<(g, n, m, k) -> (g, k, m)>, affine_map<(g, n, m, k) -> (g, n, m)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%x, %wv : tensor<8x32xf32>, tensor<1x32x64xf32>) outs(%init : tensor<1x8x64xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x8x64xf32>
    %y2 = linalg.generic {indexing_maps = [affine_map<(g, n, m, k) -> (n, k)>, affine_map<(g, n, m, k) -> (g, k, m)>, affine_map<(g, n, m, k) -> (g, n, m)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%x2, %wv : tensor<8x32xf32>, tensor<1x32x64xf32>) outs(%init : tensor<1x8x64xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<1x8x64xf32>
    return %y, %y2 : tensor<1x8x64xf32>, tensor<1x8x64xf32>
  }
}
