// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// A tensor the body both reads as an operand and captures (an add fused
// with a gather or resize of its own operand): the operand is its region of
// the piece, and the body's reads take the captured input's argument, never
// the placeholder that stood for the operand while tiling.

// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: %{{[^:]*}}: memref<{{[0-9]+}}x8xf32>, %[[WHOLE:[^:]*]]: memref<16x8xf32>
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[WHOLE]] restrict : memref<16x8xf32> to tensor<16x8xf32>
// CHECK-NOT: tensor.empty() : tensor<16x8xf32>
// CHECK: tensor.extract %[[T]]
#id = affine_map<(d0, d1) -> (d0, d1)>
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 8, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
    %e = tensor.empty() : tensor<16x8xf32>
    %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<16x8xf32>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %i = linalg.index 0 : index
      %c15 = arith.constant 15 : index
      %mirror = arith.subi %c15, %i : index
      %j = linalg.index 1 : index
      %c7 = arith.constant 7 : index
      %col = arith.subi %c7, %j : index
      %v = tensor.extract %x[%mirror, %col] : tensor<16x8xf32>
      %s = arith.addf %a, %v : f32
      linalg.yield %s : f32
    } -> tensor<16x8xf32>
    return %r : tensor<16x8xf32>
  }
}
