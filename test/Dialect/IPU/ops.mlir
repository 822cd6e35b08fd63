// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// Round trip of every ipu op and attribute.

// CHECK: module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>}
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  // CHECK-LABEL: func.func @main
  func.func @main(%x: tensor<8x4xf32> {ipu.mapping = #ipu.mapping<chunks = [2, 4], tile_strides = [1, 0], first_tile = 0>})
      -> tensor<2x16xf32> {
    // CHECK: %[[A:.*]] = ipu.alloc <chunks = [4, 4], tile_strides = [1, 0], first_tile = 2> : tensor<8x4xf32>
    %a = ipu.alloc <chunks = [4, 4], tile_strides = [1, 0], first_tile = 2> : tensor<8x4xf32>
    // CHECK: ipu.copy %{{.*}}[0, 0][4, 4] into %[[A]][4, 0] : tensor<8x4xf32> into tensor<8x4xf32>
    %c = ipu.copy %x[0, 0] [4, 4] into %a[4, 0] : tensor<8x4xf32> into tensor<8x4xf32>
    // CHECK: ipu.compute_set "cs0" ins(%{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
    // CHECK-SAME: kernels [@vertex_cs0_0] cycles [70] macs 0 mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
    %s = ipu.compute_set "cs0" ins(%x, %c : tensor<8x4xf32>, tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
        maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] full []
        kernels [@vertex_cs0_0] cycles [70] macs 0
        mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
    // CHECK: ipu.view %{{.*}} : tensor<8x4xf32> to tensor<2x16xf32>
    %v = ipu.view %s : tensor<8x4xf32> to tensor<2x16xf32>
    return %v : tensor<2x16xf32>
  }
  func.func private @vertex_cs0_0(index, index, memref<2x4xf32>, memref<2x4xf32>, memref<2x4xf32>) attributes {ipu.vertex}

  // A kernel generic over shapes (dynamic piece sizes) runs the pieces of
  // 3 and of 2 rows: it is named once per piece shape.
  // CHECK-LABEL: func.func @generic_kernel
  // CHECK: kernels [@vertex_generic, @vertex_generic] cycles [40, 30]
  func.func @generic_kernel(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %s = ipu.compute_set "cs1" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
        maps [affine_map<(d0, d1) -> (d0, d1)>] full []
        kernels [@vertex_generic, @vertex_generic] cycles [40, 30] macs 0
        mapping <chunks = [3, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
    return %s : tensor<8x4xf32>
  }
  func.func private @vertex_generic(index, index, memref<?x?xf32>, memref<?x?xf32>) attributes {ipu.vertex}
}

// Plans, with and without their flags, round-trip.
// CHECK-LABEL: func.func private @plans
// CHECK-SAME: a = #ipu.plan<mapping = #ipu.mapping<chunks = [2], tile_strides = [1], first_tile = 0>>
// CHECK-SAME: b = #ipu.plan<mapping = #ipu.mapping<chunks = [4], tile_strides = [0], first_tile = 3>, epilogue>
// CHECK-SAME: c = #ipu.plan<mapping = #ipu.mapping<chunks = [1], tile_strides = [1], first_tile = 0>, in_place>
// CHECK-SAME: d = #ipu.plan<mapping = #ipu.mapping<chunks = [1], tile_strides = [1], first_tile = 0>, epilogue, in_place>
func.func private @plans() attributes {
  a = #ipu.plan<mapping = #ipu.mapping<chunks = [2], tile_strides = [1], first_tile = 0>>,
  b = #ipu.plan<mapping = #ipu.mapping<chunks = [4], tile_strides = [0], first_tile = 3>, epilogue>,
  c = #ipu.plan<mapping = #ipu.mapping<chunks = [1], tile_strides = [1], first_tile = 0>, in_place>,
  d = #ipu.plan<mapping = #ipu.mapping<chunks = [1], tile_strides = [1], first_tile = 0>, in_place, epilogue>}
