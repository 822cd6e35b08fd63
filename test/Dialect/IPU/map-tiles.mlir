// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-map-tiles | FileCheck %s

// Two row sums share one zero fill as their init (CSE merges them). Each
// vertex copies its rows of the zeros into its output piece and accumulates
// there: the shared input is read-only (a local piece is the producer's own
// tile memory), so the second sum still starts from zeros.

// CHECK-LABEL: func.func @main
// CHECK: %[[ZERO:.*]] = ipu.compute_set "cs0" loops [8]
// CHECK: ipu.compute_set "cs1" ins(%{{.*}}, %[[ZERO]] : tensor<8x16xf32>, tensor<8xf32>) loops [8, 16] outputs [0]
// CHECK-SAME: kernels [@vertex_cs1_0]
// CHECK: %[[SQ:.*]] = ipu.compute_set "cs2" ins
// Identical sums share one kernel: cs3 runs cs1's.
// CHECK: ipu.compute_set "cs3" ins(%[[SQ]], %[[ZERO]] : tensor<8x16xf32>, tensor<8xf32>) loops [8, 16] outputs [0]
// CHECK-SAME: kernels [@vertex_cs1_0]

// The kernel of the sums: input regions read-only, the output piece
// written, the init copied in before the reduction.
// CHECK-LABEL: func.func @vertex_cs1_0
// CHECK-SAME: attributes {ipu.code_bytes = {{[0-9]+}} : i64, ipu.vertex}
// CHECK: %[[IN:.*]] = bufferization.to_tensor %{{.*}} restrict :
// CHECK: %[[INIT:.*]] = bufferization.to_tensor %{{.*}} restrict :
// CHECK: %[[OUT:.*]] = bufferization.to_tensor %{{.*}} restrict writable :
// CHECK: %[[ACC:.*]] = linalg.copy ins(%[[INIT]] : {{.*}}) outs(%[[OUT]] : {{.*}})
// CHECK: linalg.generic {{.*}} ins(%[[IN]] : {{.*}}) outs(%[[ACC]] : {{.*}})
// CHECK: bufferization.materialize_in_destination
// CHECK-NOT: func.func @vertex_cs3_0
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %sum = linalg.reduce { arith.addf } ins(%x : tensor<8x16xf32>) outs(%init : tensor<8xf32>) dimensions = [1]
    %e2 = tensor.empty() : tensor<8x16xf32>
    %sq = linalg.mul ins(%x, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
    %sumsq = linalg.reduce { arith.addf } ins(%sq : tensor<8x16xf32>) outs(%init : tensor<8xf32>) dimensions = [1]
    return %sum, %sumsq : tensor<8xf32>, tensor<8xf32>
  }
}
