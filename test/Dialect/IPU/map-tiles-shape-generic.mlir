// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// Ops without reductions run one kernel generic over the piece's shape: a
// ReLU of 8x16 (pieces of 2 rows) and one of 5x16 (2 rows and a remainder
// of 1) share one kernel, named once per piece shape, whose operands have
// dynamic sizes. A row sum's kernel is generic too: its rows (an output
// loop) from the output piece, its 16 columns (a reduction) from the
// input's region, which holds them whole.

// CHECK-LABEL: func.func @main
// CHECK: ipu.compute_set "cs0" {{.*}} kernels [@[[RELU:vertex_cs0_0]]]
// CHECK: ipu.compute_set "cs1" {{.*}} kernels [@[[RELU]], @[[RELU]]]
// CHECK: ipu.compute_set "cs2" {{.*}} kernels [@[[SUM:vertex_cs2_0]]]
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: (%{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>)
// CHECK: tensor.dim
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x?xf32>) outs(%{{.*}} : tensor<?x?xf32>)
// CHECK-NOT: func.func @vertex_cs1_
// CHECK-LABEL: func.func @vertex_cs2_0
// CHECK-SAME: memref<?x?xf32>, %{{.*}}: memref<?xf32>
// CHECK-DAG: %[[ROWS:.*]] = tensor.dim %{{.*}}, %c0 : tensor<?xf32>
// CHECK-DAG: %[[COLS:.*]] = tensor.dim %{{.*}}, %c1 : tensor<?x?xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x?xf32>) outs(%{{.*}} : tensor<?xf32>)
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>, %y: tensor<5x16xf32>) -> (tensor<8x16xf32>, tensor<5x16xf32>, tensor<8xf32>) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8x16xf32>
    %rx = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.maximumf %a, %zero : f32
      linalg.yield %m : f32
    } -> tensor<8x16xf32>
    %e5 = tensor.empty() : tensor<5x16xf32>
    %ry = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                          iterator_types = ["parallel", "parallel"]}
        ins(%y : tensor<5x16xf32>) outs(%e5 : tensor<5x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.maximumf %a, %zero : f32
      linalg.yield %m : f32
    } -> tensor<5x16xf32>
    %e8 = tensor.empty() : tensor<8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
    %sum = linalg.reduce { arith.addf } ins(%x : tensor<8x16xf32>) outs(%init : tensor<8xf32>) dimensions = [1]
    return %rx, %ry, %sum : tensor<8x16xf32>, tensor<5x16xf32>, tensor<8xf32>
  }
}
