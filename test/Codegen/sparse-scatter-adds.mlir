// RUN: tessera-opt %s --codegen-sparse-scatter-adds --split-input-file | FileCheck %s

// An embedding gradient as graph.scatter_add lowers it: every element of the
// 10x4 result compares every one of the 6 indices. It becomes a loop over
// the indices: each read once, wrapped as the body wraps it, and its update
// row added where the row lies in the buffer.
// CHECK-LABEL: func.func @embedding_gradient
// CHECK-NOT: linalg.generic
// CHECK: scf.for %[[K:.*]] = %c0 to %c6 step %c1
// CHECK:   %[[ID:.*]] = memref.load %{{.*}}[%[[K]]] : memref<6xi64>
// CHECK:   %[[ROW:.*]] = arith.select
// CHECK:   %[[LOCAL:.*]] = arith.subi %[[ROW]], %c0
// CHECK:   scf.if
// CHECK:     scf.for %[[C:.*]] = %c0 to %c4 step %c1
// CHECK:       %[[OLD:.*]] = memref.load %{{.*}}[%[[LOCAL]], %[[C]]] : memref<10x4xf32>
// CHECK:       %[[UPD:.*]] = memref.load %{{.*}}[%[[K]], %[[C]]] : memref<6x4xf32>
// CHECK:       %[[SUM:.*]] = arith.addf %[[OLD]], %[[UPD]] : f32
// CHECK:       memref.store %[[SUM]], %{{.*}}[%[[LOCAL]], %[[C]]] : memref<10x4xf32>
#idx = affine_map<(d0, d1, d2) -> (d2)>
#upd = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @embedding_gradient(%ids: memref<6xi64>, %updates: memref<6x4xf32>, %grad: memref<10x4xf32>) {
  linalg.generic {indexing_maps = [#idx, #upd, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %updates : memref<6xi64>, memref<6x4xf32>) outs(%grad : memref<10x4xf32>) {
  ^bb0(%id: i64, %u: f32, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %c0 = arith.constant 0 : index
    %c10 = arith.constant 10 : index
    %neg = arith.cmpi slt, %i, %c0 : index
    %wrapped = arith.addi %i, %c10 : index
    %row = arith.select %neg, %wrapped, %i : index
    %r = linalg.index 0 : index
    %here = arith.cmpi eq, %row, %r : index
    %zero = arith.constant 0.0 : f32
    %add = arith.select %here, %u, %zero : f32
    %s = arith.addf %o, %add : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A vertex's piece of it: rows from an offset (tiling made the compared
// position linalg.index plus the piece's first row): rows are local to it.
// CHECK-LABEL: func.func @piece
// CHECK: %[[FIRST:.*]] = affine.apply #{{.*}}(%c0)[%arg0]
// CHECK: scf.for
// CHECK:   %[[LOCAL:.*]] = arith.subi %{{.*}}, %[[FIRST]]
// CHECK-DAG:   arith.cmpi slt, %[[LOCAL]], %c5
// CHECK-DAG:   arith.cmpi sge, %[[LOCAL]], %c0
#idx = affine_map<(d0, d1, d2) -> (d2)>
#upd = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @piece(%first: index, %ids: memref<6xi64>, %updates: memref<6x4xf32>, %grad: memref<5x4xf32>) {
  linalg.generic {indexing_maps = [#idx, #upd, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %updates : memref<6xi64>, memref<6x4xf32>) outs(%grad : memref<5x4xf32>) {
  ^bb0(%id: i64, %u: f32, %o: f32):
    %row = arith.index_cast %id : i64 to index
    %r = linalg.index 0 : index
    %at = affine.apply affine_map<(d0)[s0] -> (d0 + s0)>(%r)[%first]
    %here = arith.cmpi eq, %row, %at : index
    %zero = arith.constant 0.0 : f32
    %add = arith.select %here, %u, %zero : f32
    %s = arith.addf %o, %add : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not a scatter-add: the other rows add 1, not zero. Left as it is.
// CHECK-LABEL: func.func @not_zero
// CHECK: linalg.generic
// CHECK-NOT: scf.for
#idx = affine_map<(d0, d1, d2) -> (d2)>
#upd = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @not_zero(%ids: memref<6xi64>, %updates: memref<6x4xf32>, %grad: memref<10x4xf32>) {
  linalg.generic {indexing_maps = [#idx, #upd, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %updates : memref<6xi64>, memref<6x4xf32>) outs(%grad : memref<10x4xf32>) {
  ^bb0(%id: i64, %u: f32, %o: f32):
    %row = arith.index_cast %id : i64 to index
    %r = linalg.index 0 : index
    %here = arith.cmpi eq, %row, %r : index
    %one = arith.constant 1.0 : f32
    %add = arith.select %here, %u, %one : f32
    %s = arith.addf %o, %add : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// On tensors (the planner's view) it is left for bufferization.
// CHECK-LABEL: func.func @on_tensors
// CHECK: linalg.generic
#idx = affine_map<(d0, d1, d2) -> (d2)>
#upd = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @on_tensors(%ids: tensor<6xi64>, %updates: tensor<6x4xf32>, %grad: tensor<10x4xf32>) -> tensor<10x4xf32> {
  %g = linalg.generic {indexing_maps = [#idx, #upd, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %updates : tensor<6xi64>, tensor<6x4xf32>) outs(%grad : tensor<10x4xf32>) {
  ^bb0(%id: i64, %u: f32, %o: f32):
    %row = arith.index_cast %id : i64 to index
    %r = linalg.index 0 : index
    %here = arith.cmpi eq, %row, %r : index
    %zero = arith.constant 0.0 : f32
    %add = arith.select %here, %u, %zero : f32
    %s = arith.addf %o, %add : f32
    linalg.yield %s : f32
  } -> tensor<10x4xf32>
  return %g : tensor<10x4xf32>
}
