// RUN: tessera-opt %s --codegen-outline-host-loops="part-operations=6" | FileCheck %s
// RUN: tessera-opt %s --codegen-outline-host-loops | FileCheck %s --check-prefix=ONE
//
// @main's operations move into functions in parts that end at an operation
// with regions once a part holds 6 operations; constants are cloned into
// each part, values a later part or @main reads are returned, the stack
// allocation stays in @main and splits the parts; constants stay in @main
// too (an unused one is left for the canonicalizer). With the default size
// the loops before the allocation are one part.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>)
// CHECK-COUNT-4: arith.constant
// CHECK-NEXT: %[[BUF:.*]] = call @main_part_0(%[[X]]) : (memref<4xf32>) -> memref<4xf32>
// CHECK-NEXT: %[[SUM:.*]] = call @main_part_1(%[[BUF]]) : (memref<4xf32>) -> f32
// CHECK-NEXT: %[[STACK:.*]] = memref.alloca() : memref<f32>
// CHECK-NEXT: call @main_part_2(%[[SUM]], %[[STACK]], %[[Y]], %[[BUF]]) : (f32, memref<f32>, memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT: return
// CHECK: func.func private @main_part_0(%[[A:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK-DAG: arith.constant 0 : index
// CHECK-DAG: arith.constant 4 : index
// CHECK-DAG: arith.constant 1 : index
// CHECK-NOT: arith.constant 0.0
// CHECK: %[[NEW:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.for
// CHECK: return %[[NEW]] : memref<4xf32>
// CHECK: func.func private @main_part_1(%{{.*}}: memref<4xf32>) -> f32
// CHECK: %[[R:.*]] = scf.for {{.*}} -> (f32)
// CHECK: return %[[R]] : f32
// CHECK: func.func private @main_part_2(
// CHECK: memref.dealloc

// ONE-LABEL: func.func @main
// ONE: call @main_part_0(%{{.*}}) : (memref<4xf32>) -> (memref<4xf32>, f32)
// ONE-NEXT: memref.alloca
// ONE-NEXT: call @main_part_1(

func.func @main(%x: memref<4xf32>, %y: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<4xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %x[%i] : memref<4xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %buf[%i] : memref<4xf32>
  }
  %sum = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %buf[%i] : memref<4xf32>
    %s = arith.addf %acc, %v : f32
    scf.yield %s : f32
  }
  %stack = memref.alloca() : memref<f32>
  memref.store %sum, %stack[] : memref<f32>
  scf.for %i = %c0 to %c4 step %c1 {
    %v = memref.load %stack[] : memref<f32>
    memref.store %v, %y[%i] : memref<4xf32>
  }
  memref.dealloc %buf : memref<4xf32>
  return
}
