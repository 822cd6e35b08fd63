// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles | FileCheck %s

// A table the step updates (training state: an argument whose graph.state
// a result's graph.state_update names) is read whole every step by its
// update. Its 8 columns of 640 rows fit the tiles whole, but one per tile
// would leave 8 of the 64 tiles holding it all (8x their even share), and
// the update and its write-back on those 8. It is split into row blocks
// instead, each looked up apart and the partials combined: of the block
// counts that leave no tile more than a tenth over its even share (80
// elements; 7 blocks of 92 rows would be cheaper), the cheapest lookup, 8
// blocks of 80 rows. The same lookup of a table the step does not update
// keeps whole columns (plan-tiles-gather-whole-column.mlir).

// EXPLAIN: remark: gather split into 8 blocks of 80 rows of its table (a table the step updates, spread over the tiles)
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg1: tensor<640x8xf32> {graph.state = @table, ipu.mapping = #ipu.mapping<chunks = [80, 1]
// The partial lookups, then their combination.
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8x16x8xf32>)
// CHECK: arith.cmpi ult
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<8x16x8xf32>)
// CHECK: arith.ori
#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
#all = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 64, bytes_per_tile = 65536>} {
  func.func @main(%ids: tensor<16xi64>, %table: tensor<640x8xf32> {graph.state = @table})
      -> (tensor<16x8xf32>, tensor<640x8xf32> {graph.state_update = @table}) {
    %e = tensor.empty() : tensor<16x8xf32>
    %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]}
        ins(%ids : tensor<16xi64>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<640x8xf32>
      linalg.yield %v : f32
    } -> tensor<16x8xf32>
    // The update: every element of the table, every step.
    %te = tensor.empty() : tensor<640x8xf32>
    %half = arith.constant 0.5 : f32
    %u = linalg.generic {indexing_maps = [#all, #all], iterator_types = ["parallel", "parallel"]}
        ins(%table : tensor<640x8xf32>) outs(%te : tensor<640x8xf32>) {
    ^bb0(%t: f32, %o: f32):
      %s = arith.mulf %t, %half : f32
      linalg.yield %s : f32
    } -> tensor<640x8xf32>
    return %r, %u : tensor<16x8xf32>, tensor<640x8xf32>
  }
}
