// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles | FileCheck %s
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s --check-prefix=MAPPED

// An embedding lookup whose table column (1,024 rows, 4,096 bytes) is over
// the memory budget (0.6 x 4,096 bytes per tile) and leaves no room on a
// tile for the indices and the output: the lookup is split by the table's
// rows. Block p of 512 rows is read as p * 512 + (the row's offset in the
// block, clamped), and lanes whose row is in another block (one unsigned
// compare) yield zero; the blocks' partial outputs are ORed bit for bit.

// EXPLAIN: remark: gather split into 2 blocks of 512 rows of its table (one column is 4096 bytes, over the memory budget of 2457)
// CHECK-LABEL: func.func @main
// Each tile holds one block of one column of the table.
// CHECK: ml_program.global_load_const @table : tensor<1024x8xf32> {ipu.mapping = #ipu.mapping<chunks = [512, 1], tile_strides = [{{[0-9]+}}, {{[0-9]+}}], first_tile = 0>}
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]{{.*}} outs(%{{.*}} : tensor<2x16x8xf32>)
// CHECK: %[[P:.*]] = linalg.index 2 : index
// CHECK: %[[BASE:.*]] = arith.muli %[[P]], %c512
// CHECK: %[[LOCAL:.*]] = arith.subi %{{.*}}, %[[BASE]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[LOCAL]], %c512
// CHECK: %[[SAFE:.*]] = arith.select %[[IN]], %[[LOCAL]], %c0
// CHECK: %[[ROW:.*]] = arith.addi %[[BASE]], %[[SAFE]]
// CHECK: tensor.extract %{{.*}}[%[[ROW]], %{{.*}}] : tensor<1024x8xf32>
// CHECK: arith.select %[[IN]], %{{.*}}, %{{.*}} : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%{{.*}} : tensor<2x16x8xf32>)
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.ori
// CHECK: arith.bitcast %{{.*}} : i32 to f32

// The partial lookup reads the table in blocks: map (p) -> (p * 512),
// extents [512, 1].
// MAPPED: ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}} : tensor<16xi64>, tensor<1024x8xf32>)
// MAPPED-SAME: extents [array<i64>, array<i64: 512, 1>]
// MAPPED: ipu.compute_set "cs1" ins(%{{.*}} : tensor<2x16x8xf32>)
#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 4096>} {
  ml_program.global private @table(dense<1.0> : tensor<1024x8xf32>) : tensor<1024x8xf32>
  func.func @main(%ids: tensor<16xi64>) -> tensor<16x8xf32> {
    %table = ml_program.global_load_const @table : tensor<1024x8xf32>
    %e = tensor.empty() : tensor<16x8xf32>
    %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]}
        ins(%ids : tensor<16xi64>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<1024x8xf32>
      linalg.yield %v : f32
    } -> tensor<16x8xf32>
    return %r : tensor<16x8xf32>
  }
}
