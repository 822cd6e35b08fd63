// RUN: tessera-opt %s --codegen-order-loops-for-vectors --split-input-file | FileCheck %s

// A matmul becomes the i-k-j order: the reduction moves out, the output's
// last dimension (j) goes innermost.
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$B:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$C:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @matmul
// CHECK: linalg.generic {indexing_maps = [#[[$A]], #[[$B]], #[[$C]]], iterator_types = ["parallel", "reduction", "parallel"]}
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// A convolution (n, oc, oh, ow, ic, kh, kw) becomes (n, oc, oh, ic, kh, kw, ow).
// CHECK-DAG: #[[$X:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d3, d2 + d4, d5 + d6)>
// CHECK-DAG: #[[$Y:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d6)>
// CHECK-LABEL: func.func @conv
// CHECK: linalg.generic {indexing_maps = [#[[$X]], #{{.*}}, #[[$Y]]]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel"]
func.func @conv(%x: memref<1x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %y: memref<1x4x6x6xf32>) {
  linalg.conv_2d_nchw_fchw ins(%x, %w : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>)
    outs(%y : memref<1x4x6x6xf32>)
  return
}

// -----

// Elementwise ops and reductions to a scalar keep their order.
// CHECK-LABEL: func.func @untouched
// CHECK: iterator_types = ["parallel", "parallel"]
// CHECK: iterator_types = ["reduction"]
#id = affine_map<(d0, d1) -> (d0, d1)>
#all = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>
func.func @untouched(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %v: memref<8xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction"]}
      ins(%v : memref<8xf32>) outs(%s : memref<f32>) {
  ^bb0(%x: f32, %y: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  }
  return
}
