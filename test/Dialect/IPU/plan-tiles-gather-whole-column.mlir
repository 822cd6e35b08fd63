// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles | FileCheck %s

// An embedding lookup whose table column (640 rows, 2,560 bytes) is over
// the memory budget (0.6 x 4,096 bytes per tile) but fits a tile with the
// indices and the output: the table is a variable, not a temporary, so
// its columns stay whole, one per tile, and nothing is split or combined.

// EXPLAIN-NOT: gather split
// EXPLAIN: remark: #ipu.plan<mapping = #ipu.mapping<chunks = [16, 1]
// EXPLAIN-NOT: gather split
// CHECK-LABEL: func.func @main
// CHECK: ml_program.global_load_const @table : tensor<640x8xf32> {ipu.mapping = #ipu.mapping<chunks = [640, 1]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]{{.*}} outs(%{{.*}} : tensor<16x8xf32>)
// CHECK-NOT: linalg.generic
#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 4096>} {
  ml_program.global private @table(dense<1.0> : tensor<640x8xf32>) : tensor<640x8xf32>
  func.func @main(%ids: tensor<16xi64>) -> tensor<16x8xf32> {
    %table = ml_program.global_load_const @table : tensor<640x8xf32>
    %e = tensor.empty() : tensor<16x8xf32>
    %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]}
        ins(%ids : tensor<16xi64>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<640x8xf32>
      linalg.yield %v : f32
    } -> tensor<16x8xf32>
    return %r : tensor<16x8xf32>
  }
}
