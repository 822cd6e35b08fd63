// RUN: tessera-opt %s --split-input-file --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// Two row sums share one zero fill as their init (CSE merges them). Each is
// given a fill of its own, which its vertices fold in: no compute set
// materializes the zeros, and the sums (identical) share one kernel that
// fills its output piece and accumulates there.

// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = ipu.alloc
// CHECK: %[[B:.*]] = ipu.alloc
// CHECK: ipu.compute_set "cs0" ins(%{{.*}} : tensor<8x16xf32>) inits(%[[B]] : tensor<8xf32>) loops [8, 16] outputs [0]
// CHECK-SAME: kernels [@vertex_cs0_0]
// CHECK: %[[SQ:.*]] = ipu.compute_set "cs1" ins
// CHECK: ipu.compute_set "cs2" ins(%[[SQ]] : tensor<8x16xf32>) inits(%[[A]] : tensor<8xf32>) loops [8, 16] outputs [0]
// CHECK-SAME: kernels [@vertex_cs0_0]
// CHECK-NOT: ipu.compute_set
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK: %[[OUT:.*]] = bufferization.to_tensor %{{.*}} restrict writable :
// CHECK: %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : {{.*}})
// CHECK: linalg.generic {{.*}} outs(%[[ACC]] : {{.*}})
// CHECK-NOT: func.func @vertex_cs2_0
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

// -----

// Two row sums share a computed init. Each vertex copies its rows of the
// init into its output piece and accumulates there: the shared input is
// read-only (a local piece is the producer's own tile memory), so the
// second sum still starts from the init.

// CHECK-LABEL: func.func @main
// CHECK: %[[INIT:.*]] = ipu.compute_set "cs0" ins
// CHECK: ipu.compute_set "cs1" ins(%{{.*}}, %[[INIT]] : tensor<8x16xf32>, tensor<8xf32>) loops [8, 16] outputs [0]
// CHECK-SAME: kernels [@vertex_cs1_0]
// CHECK: %[[SQ:.*]] = ipu.compute_set "cs2" ins
// Identical sums share one kernel: cs3 runs cs1's.
// CHECK: ipu.compute_set "cs3" ins(%[[SQ]], %[[INIT]] : tensor<8x16xf32>, tensor<8xf32>) loops [8, 16] outputs [0]
// CHECK-SAME: kernels [@vertex_cs1_0]

// The kernel of the sums: input regions read-only, the output piece
// written, the init copied in before the reduction.
// CHECK-LABEL: func.func @vertex_cs1_0
// CHECK-SAME: attributes {ipu.code_bytes = {{[0-9]+}} : i64, ipu.vertex}
// CHECK: %[[IN:.*]] = bufferization.to_tensor %{{.*}} restrict :
// CHECK: %[[FROM:.*]] = bufferization.to_tensor %{{.*}} restrict :
// CHECK: %[[OUT:.*]] = bufferization.to_tensor %{{.*}} restrict writable :
// CHECK: %[[ACC:.*]] = linalg.copy ins(%[[FROM]] : {{.*}}) outs(%[[OUT]] : {{.*}})
// CHECK: linalg.generic {{.*}} ins(%[[IN]] : {{.*}}) outs(%[[ACC]] : {{.*}})
// CHECK: bufferization.materialize_in_destination
// CHECK-NOT: func.func @vertex_cs3_0
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %e = tensor.empty() : tensor<8xf32>
    %init = linalg.mul ins(%b, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %sum = linalg.reduce { arith.addf } ins(%x : tensor<8x16xf32>) outs(%init : tensor<8xf32>) dimensions = [1]
    %e2 = tensor.empty() : tensor<8x16xf32>
    %sq = linalg.mul ins(%x, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
    %sumsq = linalg.reduce { arith.addf } ins(%sq : tensor<8x16xf32>) outs(%init : tensor<8xf32>) dimensions = [1]
    return %sum, %sumsq : tensor<8xf32>, tensor<8xf32>
  }
}
