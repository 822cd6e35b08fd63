// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles --split-input-file | FileCheck %s

// Virtual padding: a zero-padded input that only a convolution (here a 3x3
// window over a 6x6 image) reads is a padded view of the unpadded input.
// There is no zero-filled copy: no fill step, no copy step, no memory for
// the padded tensor; the vertices receive the input's rows and the zeros
// around them.

// CHECK-LABEL: func.func @main
// CHECK-NOT: ipu.copy
// CHECK: %[[P:.*]] = ipu.pad_view %arg0 low [1, 1] high [1, 1] padding 0.000000e+00 : f32 : tensor<6x6xf32> to tensor<8x8xf32>
// CHECK-NOT: ipu.copy
// CHECK: ipu.compute_set "{{cs[0-9]+}}" ins(%[[P]], %{{.*}} : tensor<8x8xf32>, tensor<3x3xf32>)
// CHECK-NOT: ipu.copy
// CHECK: return
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<6x6xf32>, %w: tensor<3x3xf32>) -> tensor<6x6xf32> {
    %zero = arith.constant 0.0 : f32
    %pe = tensor.empty() : tensor<8x8xf32>
    %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<8x8xf32>) -> tensor<8x8xf32>
    %xp = tensor.insert_slice %x into %pf[1, 1] [6, 6] [1, 1] : tensor<6x6xf32> into tensor<8x8xf32>
    %e = tensor.empty() : tensor<6x6xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<6x6xf32>) -> tensor<6x6xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(i, j, a, b) -> (i + a, j + b)>, affine_map<(i, j, a, b) -> (a, b)>, affine_map<(i, j, a, b) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%xp, %w : tensor<8x8xf32>, tensor<3x3xf32>) outs(%init : tensor<6x6xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<6x6xf32>
    return %y : tensor<6x6xf32>
  }
}

// -----

// A max pool's padding is -inf, and its input is read through a view that
// adds a unit dimension: still a padded view.

// CHECK-LABEL: func.func @main
// CHECK: %[[P:.*]] = ipu.pad_view %arg0 low [0, 1] high [0, 1] padding 0xFF800000 : f32 : tensor<4x6xf32> to tensor<4x8xf32>
// CHECK: %[[V:.*]] = ipu.view %[[P]] : tensor<4x8xf32> to tensor<1x4x8xf32>
// CHECK: ipu.compute_set "{{cs[0-9]+}}" ins(%[[V]]
// CHECK-NOT: ipu.copy
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<4x6xf32>) -> tensor<1x4x6xf32> {
    %ninf = arith.constant 0xFF800000 : f32
    %pe = tensor.empty() : tensor<4x8xf32>
    %pf = linalg.fill ins(%ninf : f32) outs(%pe : tensor<4x8xf32>) -> tensor<4x8xf32>
    %xp = tensor.insert_slice %x into %pf[0, 1] [4, 6] [1, 1] : tensor<4x6xf32> into tensor<4x8xf32>
    %xv = tensor.expand_shape %xp [[0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
    %e = tensor.empty() : tensor<1x4x6xf32>
    %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x4x6xf32>) -> tensor<1x4x6xf32>
    %win = tensor.empty() : tensor<3xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(g, i, j, b) -> (g, i, j + b)>, affine_map<(g, i, j, b) -> (b)>, affine_map<(g, i, j, b) -> (g, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%xv, %win : tensor<1x4x8xf32>, tensor<3xf32>) outs(%init : tensor<1x4x6xf32>) {
    ^bb0(%a: f32, %w: f32, %o: f32):
      %m = arith.maximumf %o, %a : f32
      linalg.yield %m : f32
    } -> tensor<1x4x6xf32>
    return %y : tensor<1x4x6xf32>
  }
}

// -----

// The padded tensor is also returned: it must exist, so it is filled and
// the input copied into it as before.

// CHECK-LABEL: func.func @main
// CHECK-NOT: ipu.pad_view
// CHECK: ipu.copy
// CHECK-NOT: ipu.pad_view
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<6x6xf32>, %w: tensor<3x3xf32>) -> (tensor<6x6xf32>, tensor<8x8xf32>) {
    %zero = arith.constant 0.0 : f32
    %pe = tensor.empty() : tensor<8x8xf32>
    %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<8x8xf32>) -> tensor<8x8xf32>
    %xp = tensor.insert_slice %x into %pf[1, 1] [6, 6] [1, 1] : tensor<6x6xf32> into tensor<8x8xf32>
    %e = tensor.empty() : tensor<6x6xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<6x6xf32>) -> tensor<6x6xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(i, j, a, b) -> (i + a, j + b)>, affine_map<(i, j, a, b) -> (a, b)>, affine_map<(i, j, a, b) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%xp, %w : tensor<8x8xf32>, tensor<3x3xf32>) outs(%init : tensor<6x6xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<6x6xf32>
    return %y, %xp : tensor<6x6xf32>, tensor<8x8xf32>
  }
}
