// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles | FileCheck %s

// An embedding gradient (graph.scatter_add's form): its vertices loop over
// the 16 indices whatever rows they hold (codegen-sparse-scatter-adds), but
// first write their piece's zeros, which no register tile folds: a pass of
// its own over the piece. Costed, it spreads the 640x8 gradient over the
// 64 tiles (80 rows of a column each); uncosted, every plan looked alike and the fewest pieces won:
// whole columns on 8 tiles, each writing 640 zeros (and sending 2,560
// bytes to the reader of every other row).
// CHECK-LABEL: func.func @main
// CHECK: linalg.generic
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [80, 1]
#idx = affine_map<(d0, d1, d2) -> (d2)>
#upd = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#all = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 64, bytes_per_tile = 65536>} {
  func.func @main(%ids: tensor<16xi64>, %updates: tensor<16x8xf32>) -> tensor<640x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<640x8xf32>
    %init = linalg.generic {indexing_maps = [#scalar, #all], iterator_types = ["parallel", "parallel"]}
        ins(%zero : f32) outs(%e : tensor<640x8xf32>) {
    ^bb0(%z: f32, %o: f32):
      linalg.yield %z : f32
    } -> tensor<640x8xf32>
    %g = linalg.generic {indexing_maps = [#idx, #upd, #out], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%ids, %updates : tensor<16xi64>, tensor<16x8xf32>) outs(%init : tensor<640x8xf32>) {
    ^bb0(%id: i64, %u: f32, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %r = linalg.index 0 : index
      %here = arith.cmpi eq, %row, %r : index
      %add = arith.select %here, %u, %zero : f32
      %s = arith.addf %o, %add : f32
      linalg.yield %s : f32
    } -> tensor<640x8xf32>
    return %g : tensor<640x8xf32>
  }
}
