// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain -o /dev/null 2>&1 | FileCheck %s

// The gradient of a 2-row table (BERT's segment embedding) from 512
// indices: unsplit, each of its 16 elements' vertices loops over all 512
// indices. Its body reads the row loop's index (linalg.index 0, compared
// with each index), which splitting the indices' loop leaves alone, so
// the indices are split like any reduction's: partial gradients over
// slices of them, then combined.
// CHECK: remark: split into {{[0-9]+}} partial results along reduction loop 2 (512 iterations)
#idx = affine_map<(d0, d1, d2) -> (d2)>
#upd = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#all = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 64, bytes_per_tile = 65536>} {
  func.func @main(%ids: tensor<512xi64>, %updates: tensor<512x8xf32>) -> tensor<2x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<2x8xf32>
    %init = linalg.generic {indexing_maps = [#scalar, #all], iterator_types = ["parallel", "parallel"]}
        ins(%zero : f32) outs(%e : tensor<2x8xf32>) {
    ^bb0(%z: f32, %o: f32):
      linalg.yield %z : f32
    } -> tensor<2x8xf32>
    %g = linalg.generic {indexing_maps = [#idx, #upd, #out], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%ids, %updates : tensor<512xi64>, tensor<512x8xf32>) outs(%init : tensor<2x8xf32>) {
    ^bb0(%id: i64, %u: f32, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %r = linalg.index 0 : index
      %here = arith.cmpi eq, %row, %r : index
      %add = arith.select %here, %u, %zero : f32
      %s = arith.addf %o, %add : f32
      linalg.yield %s : f32
    } -> tensor<2x8xf32>
    return %g : tensor<2x8xf32>
  }
}
