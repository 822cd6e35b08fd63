// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain -o /dev/null 2>&1 | FileCheck %s

// A lookup of 48 x 128 tokens in a 30,522 x 768 table (BERT-base's
// embedding at batch 48) on an ipu2. The candidates the planner costs
// first cut the batch finest and need the table's columns in chunks of 5
// or more: 30,522 rows x 5 x 4 bytes, over the memory budget. When none of
// those fits, it costs the candidates needing least memory too, and finds
// plans whose column chunks fit.

// CHECK: remark: #ipu.plan<mapping = #ipu.mapping<chunks = [{{[0-9]+}}, {{[0-9]+}}, {{[1-3]}}], tile_strides = {{.*}}>>: {{[0-9]+}} estimated cycles on its slowest vertex{{$}}
#ids = affine_map<(d0, d1, d2) -> (d0, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 1472, bytes_per_tile = 638976>} {
  func.func @main(%ids: tensor<48x128xi64>, %table: tensor<30522x768xf32>) -> tensor<48x128x768xf32> {
    %e = tensor.empty() : tensor<48x128x768xf32>
    %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%ids : tensor<48x128xi64>) outs(%e : tensor<48x128x768xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 2 : index
      %v = tensor.extract %table[%row, %col] : tensor<30522x768xf32>
      linalg.yield %v : f32
    } -> tensor<48x128x768xf32>
    return %r : tensor<48x128x768xf32>
  }
}
