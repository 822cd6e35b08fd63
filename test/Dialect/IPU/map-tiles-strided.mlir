// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles --ipu-map-tiles | FileCheck %s

// Strided slices with offsets (x[:, 1::2, 3::2], a swin patch merge, a
// negative-step ONNX Slice) become generics reading stride * i + offset.
// Tiling slices such an operand from stride * offset with an extent that
// counts the constant (stride * (n - 1) + offset + 1) and keeps the map; the
// planned region (what the IPU model hands the vertex) starts at the first
// element read and holds stride * (n - 1) + 1. The kernel takes the planned
// region and reads it through the map less its constants.

// CHECK-DAG: #[[$READ:.*]] = affine_map<(d0, d1) -> (0, d0 * 2 + 1, d1 * 2 + 3)>
// CHECK-DAG: #[[$SHIFTED:.*]] = affine_map<(d0, d1) -> (0, d0 * 2, d1 * 2)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1) -> (d0, d1)>

// The compute set keeps the map with its constants (the region's offsets).
// CHECK-LABEL: func.func @main
// CHECK: %[[X:.*]] = ipu.copy %{{.*}}[1, 0, 0][1, 33, 6]
// CHECK: ipu.compute_set "cs0" ins(%[[X]] : tensor<1x33x6xf32>) loops [16, 2] outputs [0, 1] maps [#[[$READ]]]
// CHECK-SAME: kernels [@vertex_cs0_0]
// CHECK-SAME: mapping <chunks = [4, 2], tile_strides = [1, 0], first_tile = 0> : tensor<16x2xf32>

// The kernel is generic over the piece's shape (an op without reductions):
// the region's sizes that the output loops index are dynamic. For four rows
// and two columns of output the IPU model hands it rows 1 + 2 * [r, r + 3]
// (7 rows) and columns 3 + 2 * [0, 1] (3 columns), and the kernel reads
// them through the map less its constants.
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: %{{.*}}: memref<1x?x?xf32>, %{{.*}}: memref<?x?xf32>
// CHECK: %[[IN:.*]] = bufferization.to_tensor %{{.*}} restrict : memref<1x?x?xf32> to tensor<1x?x?xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$SHIFTED]], #[[$OUT]]]
// CHECK-SAME: ins(%[[IN]] : tensor<1x?x?xf32>)
// CHECK-SAME: outs(%{{.*}} : tensor<?x?xf32>)
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<2x33x6xf32>) -> tensor<16x2xf32> {
    %s = tensor.extract_slice %x[1, 1, 3] [1, 16, 2] [1, 2, 2] : tensor<2x33x6xf32> to tensor<16x2xf32>
    return %s : tensor<16x2xf32>
  }
}
