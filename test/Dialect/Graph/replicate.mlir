// RUN: tessera-opt %s --graph-replicate="replicas=4" | FileCheck %s --enable-var-scope
// RUN: tessera-opt %s --graph-replicate="replicas=4 reduction=sum" | FileCheck %s --check-prefix=SUM
// RUN: tessera-opt %s --graph-replicate="replicas=1" | FileCheck %s --check-prefix=ONE
// RUN: tessera-opt %s --graph-replicate="replicas=4 accumulate=2" | FileCheck %s --check-prefix=ACC
//
// graph-replicate sums the gradients over the replicas, one
// graph.cross_replica_sum per placement (stage, IPU), and with the default
// mean divides them by the replicas; random ops draw from the seed plus the
// replica's index (a global the runtime sets per replica).

// CHECK: ml_program.global private mutable @replica.index(dense<0> : tensor<i64>) : tensor<i64> {graph.replica_index}
// CHECK-LABEL: func.func @main
// CHECK: %[[INDEX:.*]] = ml_program.global_load @replica.index
// CHECK: %[[STRIDE:.*]] = graph.constant
// CHECK: %[[OFFSET:.*]] = graph.mul %[[INDEX]], %[[STRIDE]]
// CHECK: %[[SEED:.*]] = graph.add %[[SEEDARG:.*]], %[[OFFSET]]
// CHECK: graph.random_uniform %[[SEED]],
// CHECK: %[[S0:.*]]:2 = graph.cross_replica_sum %[[GA:.*]], %[[GB:.*]] {graph.backward, graph.ipu = 0 : i64, graph.stage = 0 : i64} : tensor<2xf32>, tensor<3xf32> -> tensor<2xf32>, tensor<3xf32>
// CHECK: graph.mul %[[S0]]#0, %{{.*}} {graph.backward, graph.ipu = 0 : i64, graph.stage = 0 : i64}
// CHECK: graph.mul %[[S0]]#1
// CHECK: %[[S1:.*]] = graph.cross_replica_sum %{{.*}} {graph.backward, graph.ipu = 1 : i64, graph.stage = 1 : i64} : tensor<4xf32> -> tensor<4xf32>
// CHECK: return

// SUM: graph.cross_replica_sum
// SUM-NOT: graph.mul %{{.*}}#0
// SUM: return

// ONE-NOT: cross_replica_sum

// With accumulation the optimizer sums the accumulated gradients once per
// weight update: here only the random ops are reseeded.
// ACC: graph.random_uniform
// ACC-NOT: cross_replica_sum
// ACC: return
// ONE-NOT: replica.index

ml_program.global private @a(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @b(dense<1.0> : tensor<3xf32>) : tensor<3xf32>
ml_program.global private @c(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
func.func @main(%x: tensor<2xf32>, %seed: tensor<i64>, %counter: tensor<i64>)
    -> (tensor<2xf32>, tensor<2xf32> {graph.gradient_of = @a},
        tensor<3xf32> {graph.gradient_of = @b}, tensor<4xf32> {graph.gradient_of = @c}) {
  %u = graph.random_uniform %seed, %counter {high = 1.0 : f64, low = 0.0 : f64, stream = 0 : i64} : (tensor<i64>, tensor<i64>) -> tensor<2xf32>
  %ga = graph.neg %x {graph.ipu = 0 : i64, graph.stage = 0 : i64} : tensor<2xf32>
  %gb = graph.constant {graph.ipu = 0 : i64, graph.stage = 0 : i64} dense<2.0> : tensor<3xf32>
  %gc = graph.constant {graph.ipu = 1 : i64, graph.stage = 1 : i64} dense<3.0> : tensor<4xf32>
  return %u, %ga, %gb, %gc : tensor<2xf32>, tensor<2xf32>, tensor<3xf32>, tensor<4xf32>
}
