// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles | FileCheck %s

// A training step's update of a weight: the weight's mapping is its first
// reader's (a matmul reading it transposed: blocks whose tile strides run
// column-major, [1, 4], which no row-major candidate of the update has),
// and the update, an elementwise op whose result replaces the weight
// (graph.state_update), is planned on that same mapping: computed anywhere
// else, the IPU model copies it home after the step, an exchange the
// planner counts against every other mapping. (Without the candidate the
// update took chunks [4, 64], row-major.)
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg1: tensor<64x256xf32> {graph.state = @w, ipu.mapping = [[HOME:#ipu.mapping<[^>]*>]]}
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}}ins(%arg1 : tensor<64x256xf32>)
// CHECK-SAME: ipu.plan = #ipu.plan<mapping = [[HOME]]>
#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#y = affine_map<(d0, d1, d2) -> (d0, d1)>
#all = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 64, bytes_per_tile = 65536>} {
  func.func @main(%x: tensor<64x256xf32>, %w: tensor<64x256xf32> {graph.state = @w})
      -> (tensor<64x64xf32>, tensor<64x256xf32> {graph.state_update = @w}) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<64x64xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
    %y = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<64x256xf32>, tensor<64x256xf32>) outs(%init : tensor<64x64xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<64x64xf32>
    %we = tensor.empty() : tensor<64x256xf32>
    %half = arith.constant 0.5 : f32
    %u = linalg.generic {indexing_maps = [#all, #all], iterator_types = ["parallel", "parallel"]}
        ins(%w : tensor<64x256xf32>) outs(%we : tensor<64x256xf32>) {
    ^bb0(%t: f32, %o: f32):
      %s = arith.mulf %t, %half : f32
      linalg.yield %s : f32
    } -> tensor<64x256xf32>
    return %y, %u : tensor<64x64xf32>, tensor<64x256xf32>
  }
}
