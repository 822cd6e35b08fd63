// RUN: tessera-opt %s --ipu-prepare-for-mapping | FileCheck %s

// Named ops (fills too) become generics; a pad becomes a fill of the padded shape and
// an insert of the source; a concat becomes inserts into one empty tensor;
// tensor constants become globals the mapper places like weights.

// CHECK: ml_program.global private @[[$G:__constant_[0-9]+]](dense<{{.*}}> : tensor<4x4xf32>)
// CHECK-LABEL: func.func @main
// CHECK-NOT: tensor.pad
// CHECK-NOT: tensor.concat
// CHECK-NOT: linalg.matmul
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<6x8xf32>)
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[1, 2] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<6x8xf32>
// CHECK: %[[C:.*]] = ml_program.global_load_const @[[$G]] : tensor<4x4xf32>
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<8x4xf32>
// CHECK: tensor.insert_slice %[[C]] into %{{.*}}[4, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<8x4xf32>
module {
  func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<6x8xf32>, tensor<8x4xf32>) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<4x4xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
    %mm = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%init : tensor<4x4xf32>) -> tensor<4x4xf32>
    %pad = tensor.pad %mm low[1, 2] high[1, 2] {
    ^bb0(%i: index, %j: index):
      tensor.yield %zero : f32
    } : tensor<4x4xf32> to tensor<6x8xf32>
    %c = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<4x4xf32>
    %cat = tensor.concat dim(0) %a, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %pad, %cat : tensor<6x8xf32>, tensor<8x4xf32>
  }
}
