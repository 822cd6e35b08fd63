// RUN: tessera-opt %s --ipu-map-tiles --split-input-file | FileCheck %s

// ipu-map-tiles applies hand-written plans as they are, with no cost model's
// choice of its own: these mappings are not what ipu-plan-tiles would pick.
// Each kernel's cycles are the cost model's for its piece (60 to launch, 4
// per output row, 16 fp32 MACs or 2 fp32 lanes per cycle, 8 bytes of
// constant fill per cycle).

// The matmul by rows over the 4 tiles, its Relu an epilogue, its zero fill
// done by its vertices: one compute set, updating an allocation in place.
// The fill is the first value of the register-tiled accumulators
// (codegen-vectorize-contractions), no pass of its own. Cycles: 60 + 2 rows
// x 4 + 2x8x16 MACs / 16 + 16 Relus / 2 lanes = 92.
// CHECK-LABEL: func.func @main
// CHECK: %[[A:.*]] = ipu.alloc <chunks = [2, 8], tile_strides = [1, 0], first_tile = 0>
// CHECK: %[[Y:.*]] = ipu.compute_set "cs0" ins(%arg0, %arg1 : tensor<8x16xf32>, tensor<16x8xf32>) inits(%[[A]] : tensor<8x8xf32>)
// CHECK-SAME: kernels [@vertex_cs0_0] cycles [92] macs 1024 mapping <chunks = [2, 8], tile_strides = [1, 0], first_tile = 0>
// CHECK-NOT: ipu.compute_set
// CHECK: return %[[Y]]
// The kernel reads every range from the descriptors (a 2 x 8 piece by a
// 16-deep reduction here), as it would any other piece's.
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK-SAME: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>
// CHECK: linalg.fill
// CHECK: arith.mulf
// CHECK: arith.maximumf
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32> {ipu.mapping = #ipu.mapping<chunks = [2, 16], tile_strides = [1, 0], first_tile = 0>},
                  %w: tensor<16x8xf32> {ipu.mapping = #ipu.mapping<chunks = [16, 8], tile_strides = [0, 0], first_tile = 3>}) -> tensor<8x8xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8x8xf32>
    %init = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%zero : f32) outs(%e : tensor<8x8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2, 8], tile_strides = [1, 0], first_tile = 0>>} {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<8x8xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%init : tensor<8x8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2, 8], tile_strides = [1, 0], first_tile = 0>, epilogue, in_place>} {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<8x8xf32>
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

// Without epilogue or in_place each op is a step: the fill, the matmul
// reading it as an input, and the Relu. Three rows per piece leave a
// remainder of two: pieces of two shapes, which run one kernel generic
// over the shapes, each piece costed at its own. First tiles and strides
// as written.
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]] = ipu.compute_set "cs0" loops [8, 8] {{.*}} mapping <chunks = [8, 8], tile_strides = [0, 0], first_tile = 1>
// CHECK: %[[Y:.*]] = ipu.compute_set "cs1" ins(%arg0, %arg1, %[[F]] : {{.*}}) loops [8, 8, 16]
// CHECK-SAME: kernels [@vertex_cs1_0, @vertex_cs1_0] cycles [96, 84] macs 1024 mapping <chunks = [3, 8], tile_strides = [1, 0], first_tile = 1>
// CHECK: %[[R:.*]] = ipu.compute_set "cs2" ins(%[[Y]] : tensor<8x8xf32>) {{.*}} mapping <chunks = [8, 4], tile_strides = [0, 1], first_tile = 0>
// CHECK: return %[[Y]], %[[R]]
// CHECK-LABEL: func.func @vertex_cs1_0
// CHECK-SAME: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>
// CHECK-NOT: func.func @vertex_cs1_1
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xf32> {ipu.mapping = #ipu.mapping<chunks = [8, 16], tile_strides = [0, 0], first_tile = 0>},
                  %w: tensor<16x8xf32> {ipu.mapping = #ipu.mapping<chunks = [16, 8], tile_strides = [0, 0], first_tile = 0>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<8x8xf32>
    %init = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%zero : f32) outs(%e : tensor<8x8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [8, 8], tile_strides = [0, 0], first_tile = 1>>} {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<8x8xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%init : tensor<8x8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [3, 8], tile_strides = [1, 0], first_tile = 1>>} {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<8x8xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%y : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [8, 4], tile_strides = [0, 1], first_tile = 0>>} {
    ^bb0(%a: f32, %o: f32):
      %m = arith.maximumf %a, %zero : f32
      linalg.yield %m : f32
    } -> tensor<8x8xf32>
    return %y, %r : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// An integer matmul is not register-tiled: its vertices write the zeros
// first. Cycles: 60 + 2 rows x 4 + 2x8x16 MACs / 16 + 64 bytes of zeros / 8
// = 92.
// CHECK-LABEL: func.func @main
// CHECK: ipu.compute_set "cs0"
// CHECK-SAME: kernels [@vertex_cs0_0] cycles [92] macs 1024
// CHECK-LABEL: func.func @vertex_cs0_0
// CHECK: linalg.fill
// CHECK: arith.muli
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x16xi32> {ipu.mapping = #ipu.mapping<chunks = [2, 16], tile_strides = [1, 0], first_tile = 0>},
                  %w: tensor<16x8xi32> {ipu.mapping = #ipu.mapping<chunks = [16, 8], tile_strides = [0, 0], first_tile = 3>}) -> tensor<8x8xi32> {
    %zero = arith.constant 0 : i32
    %e = tensor.empty() : tensor<8x8xi32>
    %init = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%zero : i32) outs(%e : tensor<8x8xi32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2, 8], tile_strides = [1, 0], first_tile = 0>>} {
    ^bb0(%in: i32, %out: i32):
      linalg.yield %in : i32
    } -> tensor<8x8xi32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<8x16xi32>, tensor<16x8xi32>) outs(%init : tensor<8x8xi32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2, 8], tile_strides = [1, 0], first_tile = 0>, in_place>} {
    ^bb0(%a: i32, %b: i32, %o: i32):
      %m = arith.muli %a, %b : i32
      %s = arith.addi %o, %m : i32
      linalg.yield %s : i32
    } -> tensor<8x8xi32>
    return %y : tensor<8x8xi32>
  }
}
