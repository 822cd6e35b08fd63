// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --split-input-file | FileCheck %s
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain=true --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=record-assumed-memory=true --split-input-file | FileCheck %s --check-prefix=ASSUMED

// ipu-plan-tiles records its decisions and applies none: every generic
// stays a linalg.generic with an #ipu.plan, inputs get an ipu.mapping, and
// a padding insert that will be a padded view is marked. (Which mapping
// each op gets is the cost model's; map-tiles-*.mlir and split-reductions
// check the choices, map-tiles-apply.mlir the application.)

// With explain, each reduction says whether it was split and at what
// estimated cost against unsplit, and the splits it weighed (the partial
// sums' cycles and the combining step's), and each planned op its plan and
// cycles.
// EXPLAIN: remark: {{(not split|split into [0-9]+ partial results)}} along reduction loop 2 (16 iterations): {{[0-9]+}} estimated cycles, against {{[0-9]+}} unsplit; weighed: 2 partial results: {{[0-9]+}} ({{[0-9]+}} partial sums + {{[0-9]+}} combining + sync)
// The fill its reader updates in place says so.
// EXPLAIN: remark: #ipu.plan<mapping = #ipu.mapping<{{.*}}>>: its reader's mapping (the reader updates it in place)
// EXPLAIN: remark: #ipu.plan<mapping = #ipu.mapping<{{.*}}>, epilogue, in_place>: {{[0-9]+}} estimated cycles on its slowest vertex

// With record-assumed-memory, the module carries the most bytes the planner
// took each tile to hold during a step, one per tile (the gtest
// TilePlanner.AssumesAtLeastWhatTheAllocatorPlacesOnEveryTile checks them
// against the memory plan); without, nothing.
// ASSUMED: module attributes {ipu.assumed_tile_bytes = array<i64: {{[1-9][0-9]*}}, {{[1-9][0-9]*}}, {{[1-9][0-9]*}}, {{[1-9][0-9]*}}>
// CHECK-NOT: ipu.assumed_tile_bytes

// The matmul's Relu is its epilogue (no plan of its own), its zero fill is
// updated in place (the fill takes the matmul's mapping).
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg0: tensor<8x16xf32> {ipu.mapping = #ipu.mapping<
// CHECK-SAME: %arg1: tensor<16x8xf32> {ipu.mapping = #ipu.mapping<
// CHECK: linalg.generic {{.*}} ins(%cst : f32) {{.*}} attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<[[M:.*]]>>}
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : {{.*}}) {{.*}} attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<[[M]]>, epilogue, in_place>}
// CHECK: linalg.generic
// CHECK-NOT: ipu.plan
// CHECK-NOT: ipu.compute_set
// CHECK: return
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
    %y = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%y : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.maximumf %a, %zero : f32
      linalg.yield %m : f32
    } -> tensor<8x8xf32>
    return %r : tensor<8x8xf32>
  }
}

// -----

// The padded input of a convolution becomes a padded view: its insert is
// marked, its fill has no plan.
// CHECK-LABEL: func.func @main
// CHECK: tensor.insert_slice %arg0 into %{{.*}}[1, 1] [6, 6] [1, 1] {ipu.padded_view}
// CHECK: ins(%cst : f32) {{.*}} attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<[[M:.*]]>>}
// CHECK: ins(%inserted_slice, %arg1 : {{.*}} attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<[[M]]>, in_place>}
// CHECK-NOT: ipu.plan
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<6x6xf32>, %w: tensor<3x3xf32>) -> tensor<6x6xf32> {
    %zero = arith.constant 0.0 : f32
    %pe = tensor.empty() : tensor<8x8xf32>
    %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<8x8xf32>) -> tensor<8x8xf32>
    %xp = tensor.insert_slice %x into %pf[1, 1] [6, 6] [1, 1] : tensor<6x6xf32> into tensor<8x8xf32>
    %e = tensor.empty() : tensor<6x6xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<6x6xf32>) -> tensor<6x6xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(i, j, a, b) -> (i + a, j + b)>, affine_map<(i, j, a, b) -> (a, b)>, affine_map<(i, j, a, b) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%xp, %w : tensor<8x8xf32>, tensor<3x3xf32>) outs(%init : tensor<6x6xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
    } -> tensor<6x6xf32>
    return %y : tensor<6x6xf32>
  }
}
