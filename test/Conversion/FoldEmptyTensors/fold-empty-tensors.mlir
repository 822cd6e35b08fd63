// RUN: tessera-opt %s --split-input-file --fold-empty-tensors | FileCheck %s

// A matmul over a 0-long reduction: the zeros it starts from.
// CHECK-LABEL: func.func @matmul_over_nothing
// CHECK-SAME: (%[[X:.*]]: tensor<4x0xf32>, %[[W:.*]]: tensor<0x5xf32>)
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK-NOT: linalg.matmul
// CHECK: return %[[ZERO]]
func.func @matmul_over_nothing(%x: tensor<4x0xf32>, %w: tensor<0x5xf32>) -> tensor<4x5xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x0xf32>, tensor<0x5xf32>) outs(%z : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

// A product over an empty dimension: the 1 it starts from.
// CHECK-LABEL: func.func @product_over_nothing
// CHECK: %[[ONE:.*]] = linalg.fill
// CHECK-NOT: linalg.reduce
// CHECK: return %[[ONE]]
func.func @product_over_nothing(%x: tensor<2x0x3xf32>) -> tensor<2x3xf32> {
  %c1 = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<2x3xf32>
  %one = linalg.fill ins(%c1 : f32) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = linalg.reduce ins(%x : tensor<2x0x3xf32>) outs(%one : tensor<2x3xf32>) dimensions = [1]
    (%a: f32, %b: f32) {
      %p = arith.mulf %a, %b : f32
      linalg.yield %p : f32
    }
  return %y : tensor<2x3xf32>
}

// -----

// Elementwise over an empty tensor, and a reshape of its result: nothing
// to compute, an empty tensor each.
// CHECK-LABEL: func.func @elementwise_into_nothing
// CHECK-NOT: linalg.generic
// CHECK-NOT: tensor.reshape
// CHECK: %[[E:.*]] = tensor.empty() : tensor<0x6xf32>
// CHECK: return %[[E]]
func.func @elementwise_into_nothing(%x: tensor<2x0x3xf32>, %shape: tensor<2xi64>) -> tensor<0x6xf32> {
  %e = tensor.empty() : tensor<2x0x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x0x3xf32>) outs(%e : tensor<2x0x3xf32>) {
    ^bb0(%a: f32, %b: f32):
      %r = math.exp %a : f32
      linalg.yield %r : f32
  } -> tensor<2x0x3xf32>
  %t = linalg.transpose ins(%y : tensor<2x0x3xf32>) outs(%e : tensor<2x0x3xf32>) permutation = [0, 1, 2]
  %r = tensor.reshape %t(%shape) : (tensor<2x0x3xf32>, tensor<2xi64>) -> tensor<0x6xf32>
  return %r : tensor<0x6xf32>
}

// -----

// Padding nothing is all pad value; inserting and concatenating nothing
// leave the rest.
// CHECK-LABEL: func.func @pad_insert_concat
// CHECK-SAME: (%[[X:.*]]: tensor<0x3xf32>, %[[D:.*]]: tensor<2x3xf32>)
// CHECK: %[[C:.*]] = arith.constant 2.5
// CHECK: %[[P:.*]] = linalg.fill ins(%[[C]] : f32)
// CHECK-NOT: tensor.pad
// CHECK-NOT: tensor.insert_slice
// CHECK-NOT: tensor.concat
// CHECK: return %[[P]], %[[D]], %[[D]]
func.func @pad_insert_concat(%x: tensor<0x3xf32>, %d: tensor<2x3xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %c = arith.constant 2.5 : f32
  %p = tensor.pad %x low[1, 0] high[1, 0] {
    ^bb0(%i: index, %j: index):
      tensor.yield %c : f32
  } : tensor<0x3xf32> to tensor<2x3xf32>
  %i = tensor.insert_slice %x into %d[1, 0] [0, 3] [1, 1] : tensor<0x3xf32> into tensor<2x3xf32>
  %k = tensor.concat dim(0) %x, %d : (tensor<0x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %p, %i, %k : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Ops that do work are left alone.
// CHECK-LABEL: func.func @work
// CHECK: linalg.matmul
func.func @work(%x: tensor<4x2xf32>, %w: tensor<2x5xf32>, %z: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<4x2xf32>, tensor<2x5xf32>) outs(%z : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
