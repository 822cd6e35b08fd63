// RUN: tessera-opt %s --tessera-ipu-pipeline | FileCheck %s --check-prefix=FITS
// RUN: sed -e 's/bytes_per_tile = 638976/bytes_per_tile = 8192/' %s > %t.small.mlir
// RUN: not tessera-opt %t.small.mlir --tessera-ipu-pipeline 2>&1 | FileCheck %s --check-prefix=OOM

// On 2 tiles of 624 KiB the 64 KiB weight fits and memory is planned.
// FITS: ipu.compute_set "cs0"

// On 2 tiles of 8 KiB it does not: the error names the tile, the bytes
// needed and available, and the largest variable (the weight) by name.
// OOM: error: out of tile memory: tile {{[0-9]+}} needs {{[0-9,]+}} bytes, has 8,192
// OOM-SAME: weights 'w'
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 2, bytes_per_tile = 638976>} {
  ml_program.global private @w(dense<1.0> : tensor<128x128xf32>) : tensor<128x128xf32>
  func.func @main(%x: tensor<4x128xf32>) -> tensor<4x128xf32> {
    %zero = arith.constant 0.0 : f32
    %w = ml_program.global_load_const @w : tensor<128x128xf32>
    %e = tensor.empty() : tensor<4x128xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x128xf32>) -> tensor<4x128xf32>
    %y = linalg.matmul ins(%x, %w : tensor<4x128xf32>, tensor<128x128xf32>) outs(%init : tensor<4x128xf32>) -> tensor<4x128xf32>
    return %y : tensor<4x128xf32>
  }
}
