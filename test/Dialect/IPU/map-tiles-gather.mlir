// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// An embedding lookup: the body reads the table at data-dependent rows and
// at the output's column. The table is read with map (n, d) -> (0, d) and
// extents [rows, 1] -- its rows whole, its columns following the output's --
// so the table is placed by columns under the vertices that read them and no
// vertex receives the whole table (4 tiles of 1 KiB hold the 2 KiB table
// only this way).

// CHECK-DAG: #[[$IDS:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[$TABLE:.*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.*]] = ml_program.global_load_const @table : tensor<64x8xf32> {ipu.mapping = #ipu.mapping<chunks = [64, 2], tile_strides = [0, 1], first_tile = 0>}
// CHECK: ipu.compute_set "cs0" ins(%{{.*}}, %[[T]] : tensor<16xi64>, tensor<64x8xf32>)
// CHECK-SAME: maps [#[[$IDS]], #[[$TABLE]]] full [] extents [array<i64>, array<i64: 64, 1>]
// CHECK-SAME: mapping <chunks = [16, 2], tile_strides = [0, 1], first_tile = 0> : tensor<16x8xf32>

// The vertex takes the piece's loop offsets and the table's columns: its
// column index, global after tiling, is shifted by the piece's offset.
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: (%{{.*}}: index, %[[D:.*]]: index, %{{.*}}: memref<16xi64>, %{{.*}}: memref<64x2xf32>, %{{.*}}: memref<16x2xf32>)
// CHECK: %[[COLS:.*]] = bufferization.to_tensor %{{.*}} restrict : memref<64x2xf32> to tensor<64x2xf32>
// CHECK: linalg.generic
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: %[[G:.*]] = affine.apply #{{.*}}()[%[[J]], %[[D]]]
// CHECK: %[[L:.*]] = arith.subi %[[G]], %[[D]]
// CHECK: tensor.extract %[[COLS]][%{{.*}}, %[[L]]] : tensor<64x2xf32>
#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 1024>} {
  ml_program.global private @table(dense<1.0> : tensor<64x8xf32>) : tensor<64x8xf32>
  func.func @main(%ids: tensor<16xi64>) -> tensor<16x8xf32> {
    %table = ml_program.global_load_const @table : tensor<64x8xf32>
    %e = tensor.empty() : tensor<16x8xf32>
    %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]}
        ins(%ids : tensor<16xi64>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<64x8xf32>
      linalg.yield %v : f32
    } -> tensor<16x8xf32>
    return %r : tensor<16x8xf32>
  }
}
