// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain=true -o %t.threads.mlir 2> %t.threads.txt
// RUN: tessera-opt %s --ipu-prepare-for-mapping --ipu-plan-tiles=explain=true --mlir-disable-threading -o %t.one.mlir 2> %t.one.txt
// RUN: cmp %t.threads.mlir %t.one.mlir
// RUN: cmp %t.threads.txt %t.one.txt
// RUN: FileCheck %s < %t.threads.mlir

// ipu-plan-tiles costs an op's candidate plans on every thread of the
// context, each thread placing the unplaced operands (%x, %w, %b here) its
// candidates read on variables of its own and keeping its own view reads
// (the reshape); the best is chosen in the candidates' order. The plans,
// and the estimates the remarks give (the matmul's split weighed against
// unsplit included), are those of one thread.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg0: tensor<64x512xf32> {ipu.mapping = #ipu.mapping<
// CHECK-SAME: %arg1: tensor<512x384xf32> {ipu.mapping = #ipu.mapping<
// CHECK: ins(%arg0, %arg1, {{.*}} attrs = {ipu.plan = #ipu.plan<mapping
// CHECK: tensor.collapse_shape
// CHECK: ins(%collapsed, %arg2 : {{.*}} attrs = {ipu.plan = #ipu.plan<mapping
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 1472, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<64x512xf32>, %w: tensor<512x384xf32>, %b: tensor<24576xf32>) -> tensor<24576xf32> {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<64x384xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64x384xf32>) -> tensor<64x384xf32>
    %y = linalg.matmul ins(%x, %w : tensor<64x512xf32>, tensor<512x384xf32>) outs(%init : tensor<64x384xf32>) -> tensor<64x384xf32>
    %flat = tensor.collapse_shape %y [[0, 1]] : tensor<64x384xf32> into tensor<24576xf32>
    %e2 = tensor.empty() : tensor<24576xf32>
    %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%flat, %b : tensor<24576xf32>, tensor<24576xf32>) outs(%e2 : tensor<24576xf32>) {
    ^bb0(%a: f32, %c: f32, %o: f32):
      %s = arith.addf %a, %c : f32
      linalg.yield %s : f32
    } -> tensor<24576xf32>
    return %r : tensor<24576xf32>
  }
}
