// RUN: tessera-opt %s --ipu-fuse-elementwise --split-input-file | FileCheck %s

// A residual Add and the Relu after it become one generic: one compute set.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @add_relu
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: arith.addf
// CHECK-NEXT: arith.maximumf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @add_relu(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %relu : tensor<4x8xf32>
}

// -----

// An Add read twice stays: fusing it would compute it twice.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @shared
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<4x8xf32>)
// CHECK: return %[[SUM]], %{{.*}}
func.func @shared(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sum : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %sum, %relu : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A reduction's result is not fused into its reader: the reader would
// recompute the reduction per element.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @after_reduction
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]
func.func @after_reduction(%a: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %relu = linalg.generic {indexing_maps = [#col, #col], iterator_types = ["parallel"]}
      ins(%sum : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %relu : tensor<4xf32>
}

// -----

// A deviation squared that only a sum reads (a batch norm's variance) is
// computed in the sum's body, each element as it is added in: one step, no
// intermediate tensor. The named reduce becomes a generic first.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @into_reduction
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: arith.subf
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.reduce
// CHECK: return
func.func @into_reduction(%x: tensor<4x8xf32>, %mean: tensor<4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %s = arith.mulf %d, %d : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %sum = linalg.reduce ins(%sq : tensor<4x8xf32>) outs(%init : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %t = arith.addf %in, %acc : f32
      linalg.yield %t : f32
    }
  return %sum : tensor<4xf32>
}

// -----

// A matmul reads each element of its operands many times: a Relu feeding
// one stays a step of its own (fused, it would run once per use, and the
// matmul would no longer be a contraction).

#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @not_into_matmul
// CHECK: %[[RELU:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[RELU]], %arg1
func.func @not_into_matmul(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>, %init: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %mm = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%relu, %b : tensor<4x8xf32>, tensor<8x2xf32>) outs(%init : tensor<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  return %mm : tensor<4x2xf32>
}

// -----

// A matmul's bias Add stays its epilogue (the tile mapper runs it in the
// matmul's vertices, where the result is) even when only a sum reads it.

#lhs = affine_map<(d0, d1, d2) -> (d0, d2)>
#rhs = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @epilogue_stays
// CHECK: %[[MM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: %[[BIAS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%[[MM]], %arg1
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[BIAS]]
func.func @epilogue_stays(%a: tensor<4x8xf32>, %bias: tensor<2xf32>, %b: tensor<8x2xf32>,
                          %init: tensor<4x2xf32>, %sumInit: tensor<4xf32>) -> tensor<4xf32> {
  %mm = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8x2xf32>) outs(%init : tensor<4x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %biased = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%x: f32, %c: f32, %o: f32):
    %s = arith.addf %x, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  %sum = linalg.reduce ins(%biased : tensor<4x2xf32>) outs(%sumInit : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %t = arith.addf %in, %acc : f32
      linalg.yield %t : f32
    }
  return %sum : tensor<4xf32>
}
