// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain=true -o %t.plan.mlir 2> %t.remarks.txt
// RUN: FileCheck %s --check-prefix=PLAN < %t.plan.mlir
// RUN: FileCheck %s --check-prefix=REMARK < %t.remarks.txt
// RUN: tessera-opt %t.plan.mlir --ipu-map-tiles -o %t.mapped.mlir
// RUN: tessera-opt %t.mapped.mlir --ipu-allocate-memory | FileCheck %s --check-prefix=PROGRAM
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles="available-memory-proportion=0.012" | FileCheck %s --check-prefix=SMALL
// RUN: sed -e 's/counts = array<i64: 16>/counts = array<i64: 16, 2>/' %t.mapped.mlir > %t.unpaired.mlir
// RUN: not tessera-opt %t.unpaired.mlir --ipu-allocate-memory 2>&1 | FileCheck %s --check-prefix=UNPAIRED
// RUN: sed -e 's/tile_strides = array<i64: 1>/tile_strides = array<i64: 2>/' %t.mapped.mlir > %t.outside.mlir
// RUN: not tessera-opt %t.outside.mlir --ipu-allocate-memory 2>&1 | FileCheck %s --check-prefix=OUTSIDE

// A 1x1 convolution on 16 tiles, each computing one row of 16 pixels of
// every output channel: every tile reads all of the weight (4,096 bytes).
// Held once, 15 tiles would receive it in every run (1,024 cycles at the
// exchange's 4 bytes per cycle, against 1,024 cycles of compute). Mirrored,
// a copy on each row's tile is loaded once with the program and read in
// place: the weight's mapping is one piece (on tile 0) with 16 copies a
// tile apart.
// PLAN: ml_program.global_load_const @w : tensor<32x32x1x1xf32> {ipu.mapping = #ipu.mapping<chunks = [32, 32, 1, 1], tile_strides = [0, 0, 0, 0], first_tile = 0>, ipu.mirrors = {counts = array<i64: 16>, tile_strides = array<i64: 1>}}
// PLAN: ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [1, 32, 1, 16], tile_strides = [0, 0, 1, 0], first_tile = 0>, in_place>
// REMARK: remark: mirrored: a copy on each of 16 blocks of the tiles that read it, loaded once instead of received in every run
// REMARK: 1752 estimated cycles on its slowest vertex

// The machine program places every copy (ipu-allocate-memory exports it,
// checks the mapping and plans the memory).
// PROGRAM: ml_program.global_load_const @w {{.*}}ipu.mirrors = {counts = array<i64: 16>, tile_strides = array<i64: 1>}
// PROGRAM: ipu.compute_set "cs0"

// Weights and their copies may take two thirds of the memory budget on a
// tile, and one op's copies a quarter of that: with a budget of 7,667
// bytes (a proportion of 0.012) that is 1,277 bytes, less than the weight
// or its halves, and the weight is not mirrored.
// SMALL: ml_program.global_load_const @w : tensor<32x32x1x1xf32> {ipu.mapping = #ipu.mapping<{{[^>]*}}>}
// SMALL-NOT: ipu.mirrors

// A malformed or forged ipu.mirrors is refused by name.
// UNPAIRED: error: 'ipu.mirrors' must be {counts = array<i64: ...>, tile_strides = array<i64: ...>} with as many counts as strides
// OUTSIDE: error: program: variable 1 ('w'): mapping places piece at [0,0,0,0] on tile 16, outside [0, 16)
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 16, bytes_per_tile = 638976>} {
  ml_program.global private @w(dense<0.5> : tensor<32x32x1x1xf32>) : tensor<32x32x1x1xf32>
  func.func @main(%x: tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32> {
    %zero = arith.constant 0.0 : f32
    %w = ml_program.global_load_const @w : tensor<32x32x1x1xf32>
    %e = tensor.empty() : tensor<1x32x16x16xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32>
    %y = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x32x16x16xf32>, tensor<32x32x1x1xf32>) outs(%init : tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32>
    return %y : tensor<1x32x16x16xf32>
  }
}
