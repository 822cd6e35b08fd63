// RUN: tessera-opt %s --convert-graph-to-linalg | FileCheck %s

// Unsigned tensors lower to signless ones computed with unsigned arith ops;
// @main's interface keeps the graph element type as graph.element_type.

ml_program.global private @table(dense<[1, 2, 200, 255]> : tensor<4xui8>) : tensor<4xui8>

// CHECK: ml_program.global private @table(dense<[1, 2, -56, -1]> : tensor<4xi8>) : tensor<4xi8>
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<4xi8> {graph.element_type = ui8}, %{{.*}}: tensor<4xi32>)
// CHECK-SAME: -> (tensor<4xi8> {graph.element_type = ui8}, tensor<4xi1>, tensor<4xf32>)
func.func @main(%x: tensor<4xui8>, %y: tensor<4xi32>) -> (tensor<4xui8>, tensor<4xi1>, tensor<4xf32>) {
  %t = ml_program.global_load_const @table : tensor<4xui8>
  // CHECK: linalg.generic
  // CHECK: ^bb0(%{{.*}}: i8, %{{.*}}: i8, %{{.*}}: i8):
  // CHECK: arith.divui
  %q = graph.div %x, %t : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK: arith.cmpi ult
  %lt = graph.less %q, %t : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  // CHECK: arith.uitofp
  %f = graph.cast %q : tensor<4xui8> to tensor<4xf32>
  return %q, %lt, %f : tensor<4xui8>, tensor<4xi1>, tensor<4xf32>
}
