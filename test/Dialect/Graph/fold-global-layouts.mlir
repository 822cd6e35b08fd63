// RUN: tessera-opt %s --graph-fold-global-layouts --symbol-dce | FileCheck %s

// A transposed weight (Gemm's transB) becomes a new global holding the
// transposed data: [[1, 2, 3], [4, 5, 6]] -> [[1, 4], [2, 5], [3, 6]].
// CHECK: ml_program.global private @w.T(dense_resource<w.T> : tensor<3x2xf32>)
// CHECK-NOT: ml_program.global private @w(
// CHECK-LABEL: func.func @transposed
// CHECK: %[[W:.*]] = ml_program.global_load_const @w.T : tensor<3x2xf32>
// CHECK: graph.matmul %arg0, %[[W]]
ml_program.global private @w(dense_resource<w_blob> : tensor<2x3xf32>) : tensor<2x3xf32>
func.func @transposed(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = ml_program.global_load_const @w : tensor<2x3xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %y = graph.matmul %x, %t : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// A reshape shares the payload under the new type; the global that is still
// read elsewhere stays.
// CHECK: ml_program.global private @v(dense_resource<v_blob> : tensor<6xf32>)
// CHECK: ml_program.global private @v.reshaped(dense_resource<v_blob> : tensor<2x3xf32>)
// CHECK-LABEL: func.func @reshaped
// CHECK-DAG: ml_program.global_load_const @v.reshaped : tensor<2x3xf32>
// CHECK-DAG: ml_program.global_load_const @v : tensor<6xf32>
ml_program.global private @v(dense_resource<v_blob> : tensor<6xf32>) : tensor<6xf32>
func.func @reshaped() -> (tensor<2x3xf32>, tensor<6xf32>) {
  %v = ml_program.global_load_const @v : tensor<6xf32>
  %r = graph.reshape %v : tensor<6xf32> -> tensor<2x3xf32>
  return %r, %v : tensor<2x3xf32>, tensor<6xf32>
}

// Mutable globals (optimizer state, later) are not folded.
// CHECK-LABEL: func.func @mutable
// CHECK: graph.transpose
ml_program.global private mutable @m(dense_resource<w_blob> : tensor<2x3xf32>) : tensor<2x3xf32>
func.func @mutable() -> tensor<3x2xf32> {
  %m = ml_program.global_load @m : tensor<2x3xf32>
  %t = graph.transpose %m {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return %t : tensor<3x2xf32>
}

// CHECK: w.T: "0x040000000000803F00008040000000400000A040000040400000C040"
{-#
  dialect_resources: {
    builtin: {
      w_blob: "0x040000000000803F0000004000004040000080400000A0400000C040",
      v_blob: "0x040000000000803F0000004000004040000080400000A0400000C040"
    }
  }
#-}
