// RUN: tessera-opt %s --ipu-plan-tiles --ipu-map-tiles | FileCheck %s
//
// A cross-replica sum's results are new variables mapped like its inputs
// (each tile sums the piece it holds with the other replicas'), recorded as
// ipu.mappings and kept through ipu-map-tiles for the program export.

// CHECK-LABEL: func.func @main
// CHECK: %[[G:.*]] = ipu.compute_set {{.*}} mapping <[[M:.*]]> : tensor<64x32xf32>
// CHECK: %[[S:.*]] = ipu.cross_replica_sum %[[G]] {ipu.mappings = [#ipu.mapping<[[M]]>]} : tensor<64x32xf32> -> tensor<64x32xf32>
// CHECK: return %[[S]]
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
    %e = tensor.empty() : tensor<64x32xf32>
    %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) {
    ^bb0(%a: f32, %b: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<64x32xf32>
    %s = ipu.cross_replica_sum %g : tensor<64x32xf32> -> tensor<64x32xf32>
    return %s : tensor<64x32xf32>
  }
}
