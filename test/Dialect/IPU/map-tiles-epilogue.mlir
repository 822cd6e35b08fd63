// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles --split-input-file | FileCheck %s

// The Relu after a matmul runs in the matmul's vertices, on each output
// piece right after it is computed: one compute set, whose result is the
// Relu's, and no tile memory for the matmul's own result.

// CHECK-LABEL: func.func @main
// CHECK: %[[Y:.*]] = ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<16x8xf32>)
// CHECK-NOT: ipu.compute_set
// CHECK: return %[[Y]]
// The kernel: the matmul into the output piece, then the Relu on it in place.
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK: %[[MM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: %[[RELU:.*]] = linalg.generic {{.*}} ins(%[[MM]] : {{.*}}) outs(%[[MM]] : {{.*}})
// CHECK: arith.maximumf
// CHECK: bufferization.materialize_in_destination %[[RELU]]
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

// The matmul's result is also returned: the Relu is a step of its own.

// CHECK-LABEL: func.func @main
// CHECK: %[[Y:.*]] = ipu.compute_set "cs0"
// CHECK: %[[R:.*]] = ipu.compute_set "cs1" ins(%[[Y]] : tensor<8x8xf32>)
// CHECK: return %[[Y]], %[[R]]
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
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
    return %y, %r : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// A matmul split over k (see split-reductions.mlir): the Relu runs in the
// step that combines the partial results, after the last one is added.

// CHECK-LABEL: func.func @main
// CHECK: %[[PARTIAL:.*]] = ipu.compute_set "cs0" ins
// CHECK: %[[Y:.*]] = ipu.compute_set "cs1" ins(%[[PARTIAL]] : tensor<16x4x8xf32>)
// CHECK-NOT: ipu.compute_set
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @vertex_cs1_0
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : {{.*}}) outs(%[[SUM]] : {{.*}})
// CHECK: arith.maximumf
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  ml_program.global private @w(dense<1.0> : tensor<2048x8xf32>) : tensor<2048x8xf32>
  func.func @main(%x: tensor<4x2048xf32>) -> tensor<4x8xf32> {
    %zero = arith.constant 0.0 : f32
    %w = ml_program.global_load_const @w : tensor<2048x8xf32>
    %e = tensor.empty() : tensor<4x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = linalg.matmul ins(%x, %w : tensor<4x2048xf32>, tensor<2048x8xf32>) outs(%init : tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%y : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.maximumf %a, %zero : f32
      linalg.yield %m : f32
    } -> tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
}

// -----

// A residual Add and Relu (one generic after ipu-fuse-elementwise) after a
// matmul: the residual is one more input of the matmul's compute set, read
// at the output piece's indices, and the epilogue reads it there.

// CHECK-LABEL: func.func @main
// CHECK: %[[Y:.*]] = ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}}, %arg2 : tensor<8x16xf32>, tensor<16x8xf32>, tensor<8x8xf32>)
// CHECK-NOT: ipu.compute_set
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: %[[RES:arg[0-9]+]]: memref<?x?xf32>, %{{arg[0-9]+}}: memref<?x?xf32>) attributes
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[RES]] restrict :
// CHECK: %[[MM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}} ins(%[[MM]], %[[R]] : {{.*}}) outs(%[[MM]] : {{.*}})
// CHECK: arith.addf
// CHECK-NEXT: arith.maximumf
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>, %res: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
    %y = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%y, %res : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      %m = arith.maximumf %s, %zero : f32
      linalg.yield %m : f32
    } -> tensor<8x8xf32>
    return %r : tensor<8x8xf32>
  }
}

// -----

// A bias broadcast along the rows, then Relu: the bias is read at the
// piece's columns only.

// CHECK-DAG: #[[$COLS:.*]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: func.func @main
// CHECK: %[[Y:.*]] = ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}}, %arg2 : tensor<8x16xf32>, tensor<16x8xf32>, tensor<8xf32>)
// CHECK-SAME: maps [#{{[a-z0-9]+}}, #{{[a-z0-9]+}}, #[[$COLS]]]
// CHECK-NOT: ipu.compute_set
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: %[[BIAS:arg[0-9]+]]: memref<?xf32>, %{{arg[0-9]+}}: memref<?x?xf32>) attributes
// CHECK: %[[B:.*]] = bufferization.to_tensor %[[BIAS]] restrict :
// CHECK: %[[MM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}} ins(%[[MM]], %[[B]] : {{.*}}) outs(%[[MM]] : {{.*}})
// CHECK: arith.addf
// CHECK-NEXT: arith.maximumf
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>, %bias: tensor<8xf32>) -> tensor<8x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
    %y = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%y, %bias : tensor<8x8xf32>, tensor<8xf32>) outs(%e : tensor<8x8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      %m = arith.maximumf %s, %zero : f32
      linalg.yield %m : f32
    } -> tensor<8x8xf32>
    return %r : tensor<8x8xf32>
  }
}

// -----

// fp16.32: an fp16 matmul adding into f32 partial sums, rounded to fp16 with
// its bias by the elementwise op after it (through the reshape a batched
// matmul leaves). The epilogue's type differs, so it writes a result of its
// own: one compute set with both results, the sums (dead after it) and the
// fp16 result, seen through a view in the epilogue's shape.

// CHECK-LABEL: func.func @main
// CHECK: %[[CS:.*]]:2 = ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x8x16xf16>, tensor<1x16x8xf16>, tensor<8xf16>) {{.*}} : tensor<1x8x8xf32>, tensor<1x8x8xf16>
// CHECK-NOT: ipu.compute_set
// CHECK: %[[Y:.*]] = ipu.view %[[CS]]#1 : tensor<1x8x8xf16> to tensor<8x8xf16>
// CHECK: return %[[Y]]
// The kernel (generic over shapes): the sums into the first piece, the
// rounding into the second.
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: memref<?x?x?xf32>, %{{.*}}: memref<?x?x?xf16>)
// CHECK: %[[MM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: arith.extf
// CHECK: %[[ROUNDED:.*]] = linalg.generic {{.*}} ins(%[[MM]], %{{.*}} : tensor<?x?x?xf32>, tensor<?xf16>) outs(%{{.*}} : tensor<?x?x?xf16>)
// CHECK: arith.truncf
// CHECK: bufferization.materialize_in_destination %[[MM]]
// CHECK: bufferization.materialize_in_destination %[[ROUNDED]]
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<1x8x16xf16>, %w: tensor<1x16x8xf16>, %b: tensor<8xf16>) -> tensor<8x8xf16> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<1x8x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(n, i, j, k) -> (n, i, k)>, affine_map<(n, i, j, k) -> (n, k, j)>, affine_map<(n, i, j, k) -> (n, i, j)>],
                         iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<1x8x16xf16>, tensor<1x16x8xf16>) outs(%init : tensor<1x8x8xf32>) {
    ^bb0(%a: f16, %c: f16, %o: f32):
      %wa = arith.extf %a : f16 to f32
      %wc = arith.extf %c : f16 to f32
      %m = arith.mulf %wa, %wc : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<1x8x8xf32>
    %flat = tensor.collapse_shape %y [[0, 1], [2]] : tensor<1x8x8xf32> into tensor<8x8xf32>
    %e16 = tensor.empty() : tensor<8x8xf16>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%flat, %b : tensor<8x8xf32>, tensor<8xf16>) outs(%e16 : tensor<8x8xf16>) {
    ^bb0(%a: f32, %c: f16, %o: f16):
      %t = arith.truncf %a : f32 to f16
      %s = arith.addf %t, %c : f16
      linalg.yield %s : f16
    } -> tensor<8x8xf16>
    return %r : tensor<8x8xf16>
  }
}
