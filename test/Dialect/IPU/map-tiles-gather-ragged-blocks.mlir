// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// A lookup split by its table's rows (1,023 rows, 4,092 bytes a column:
// no room on a 4,096-byte tile for the indices and the output) into 2
// blocks of 512 rows, the last one 511. Pieces of one output shape read
// table regions of two shapes, so the kernels take the table's rows from
// the descriptor; the columns, which follow the output's, stay static.

// CHECK: ml_program.global_load_const @table : tensor<1023x8xf32> {ipu.mapping = #ipu.mapping<chunks = [512, 1]
// CHECK: ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}} : tensor<16xi64>, tensor<1023x8xf32>)
// CHECK-SAME: extents [array<i64>, array<i64: 512, 1>]
// CHECK: func.func @vertex_cs0_0({{.*}}: memref<16xi64>, %{{.*}}: memref<?x1xf32>, %{{.*}}: memref<1x16x1xf32>)
#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 4096>} {
  ml_program.global private @table(dense<1.0> : tensor<1023x8xf32>) : tensor<1023x8xf32>
  func.func @main(%ids: tensor<16xi64>) -> tensor<16x8xf32> {
    %table = ml_program.global_load_const @table : tensor<1023x8xf32>
    %e = tensor.empty() : tensor<16x8xf32>
    %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]}
        ins(%ids : tensor<16xi64>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<1023x8xf32>
      linalg.yield %v : f32
    } -> tensor<16x8xf32>
    return %r : tensor<16x8xf32>
  }
}
