// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5,momentum=0.9" | FileCheck %s --enable-var-scope
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=lamb:max-grad-norm=2 accumulate=4" | FileCheck %s --check-prefix=ACC
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5 accumulate=4 replicas=2" | FileCheck %s --check-prefix=REPL
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5 replicas=2" | FileCheck %s --check-prefix=NOACC
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5,momentum=0.9,velocity-scaling=128" | FileCheck %s --check-prefix=VEL
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=sgd:lr=0.5,momentum=0.9" | FileCheck %s --check-prefix=NOVEL
// RUN: tessera-opt %s --graph-optimizer-update="optimizer=adam:accum-type=float16,second-order-momentum-accum-type=half accumulate=2" | FileCheck %s --check-prefix=TYPES
//
// graph-optimizer-update turns the weight into a mutable global stored after
// its update, adds the momentum buffer and hyperparameters as globals (the
// learning rate a global the runtime may change), and drops the gradient.

// CHECK-DAG: ml_program.global private mutable @w(
// CHECK-DAG: ml_program.global private mutable @optimizer.lr(dense<5.000000e-01> : tensor<f32>) : tensor<f32> {graph.hyperparameter}
// CHECK-DAG: ml_program.global private mutable @"w/momentum_buffer"(dense<0.000000e+00> : tensor<2xf32>) : tensor<2xf32> {graph.optimizer_state}
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {graph.loss})
// CHECK-SAME: attributes {graph.optimizer = "sgd"}
// CHECK: ml_program.global_store @"w/momentum_buffer"
// CHECK: ml_program.global_store @w
// CHECK: return %{{.*}} : tensor<f32>

// LAMB with clipping and 4 micro-batches per update: the micro-batch count
// and the gradient sum are optimizer state; the accumulator restarts at 0
// and every other store keeps the old value until the 4th micro-batch:
// those are marked graph.per_update (the machine program runs what only
// they read once per update), the counter graph.micro_batch_counter.
// ACC-DAG: ml_program.global private mutable @optimizer.micro_step(dense<0.000000e+00> : tensor<f32>) : tensor<f32> {graph.micro_batch_counter, graph.optimizer_state}
// ACC-DAG: ml_program.global private mutable @"w/grad_accum"(dense<0.000000e+00> : tensor<2xf32>) : tensor<2xf32> {graph.optimizer_state}
// ACC-DAG: ml_program.global private mutable @"optimizer.max-grad-norm"(dense<2.000000e+00> : tensor<f32>) : tensor<f32> {graph.hyperparameter}
// ACC-DAG: ml_program.global private mutable @"w/exp_avg_sq"(
// ACC-NOT: max-weight-norm
// ACC-LABEL: func.func @main
// ACC: %[[MICRO:.*]] = ml_program.global_load @optimizer.micro_step
// ACC: %[[NEXT:.*]] = graph.add %[[MICRO]]
// ACC: %[[COMMIT:.*]] = graph.equal %[[NEXT]]
// ACC: ml_program.global_store @optimizer.micro_step = %{{.*}} : tensor<f32>{{$}}
// ACC: %[[SUM:.*]] = graph.add %{{.*}}, %arg0
// ACC: %[[RESTART:.*]] = graph.select %[[COMMIT]], %{{.*}}, %[[SUM]]
// ACC: ml_program.global_store @"w/grad_accum" = %[[RESTART]] : tensor<2xf32>{{$}}
// ACC: graph.reduce_sum
// ACC: graph.sqrt
// ACC: ml_program.global_store @"w/exp_avg_sq" = %{{.*}} {graph.per_update}
// ACC: %[[KEEP:.*]] = graph.select %[[COMMIT]], %{{.*}}, %{{.*}} : (tensor<i1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// ACC-NEXT: ml_program.global_store @w = %[[KEEP]] : tensor<2xf32> {graph.per_update}
// Replicas with accumulation: the accumulated gradient (not each
// micro-batch's) is summed over the replicas and halved (the mean), then
// divided by the 4 micro-batches, on the path only the committed update
// reads. Without accumulation graph-replicate sums the gradients instead.
// REPL: %[[SUM:.*]] = graph.add %{{.*}}, %arg0
// REPL: graph.select %{{.*}}, %{{.*}}, %[[SUM]]
// REPL: %[[MEAN:.*]] = graph.mul %[[SUM]], %{{.*}}
// REPL: %[[ALL:.*]] = graph.cross_replica_sum %[[MEAN]] {graph.backward}
// REPL: graph.mul %[[ALL]], %{{.*}} {graph.backward}
// REPL: ml_program.global_store @w = %{{.*}} {graph.per_update}
// NOACC-NOT: cross_replica_sum

// PopTorch's velocity scaling: the buffer holds the velocity times the
// scale (a runtime hyperparameter); the update reads it divided back. At 1
// (the default) the term is left out.
// VEL: ml_program.global private mutable @"optimizer.velocity-scaling"(dense<1.280000e+02> : tensor<f32>) : tensor<f32> {graph.hyperparameter}
// VEL: %[[VS:.*]] = ml_program.global_load @"optimizer.velocity-scaling"
// VEL: graph.mul %[[VS]], %{{.*}}
// VEL: ml_program.global_store @"w/momentum_buffer" = %[[BUF:.*]] :
// VEL: graph.div %[[BUF]], %[[VS]]
// NOVEL-NOT: velocity

// PopTorch's accumulator types: fp16 gradient accumulators and second
// moments for an fp32 weight. The gradient is rounded into the accumulator,
// the state read back into fp32, updated there and rounded when stored; the
// first moment stays fp32.
// TYPES-DAG: ml_program.global private mutable @"w/grad_accum"(dense<0.000000e+00> : tensor<2xf16>) : tensor<2xf16> {graph.optimizer_state}
// TYPES-DAG: ml_program.global private mutable @"w/exp_avg"(dense<0.000000e+00> : tensor<2xf32>) : tensor<2xf32> {graph.optimizer_state}
// TYPES-DAG: ml_program.global private mutable @"w/exp_avg_sq"(dense<0.000000e+00> : tensor<2xf16>) : tensor<2xf16> {graph.optimizer_state}
// TYPES-LABEL: func.func @main
// TYPES: %[[SLOT:.*]] = ml_program.global_load @"w/grad_accum" : tensor<2xf16>
// TYPES: %[[G16:.*]] = graph.cast %arg0 : tensor<2xf32> to tensor<2xf16>
// TYPES: %[[SUM:.*]] = graph.add %[[SLOT]], %[[G16]] : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
// TYPES: ml_program.global_store @"w/grad_accum" = %{{.*}} : tensor<2xf16>
// TYPES: %[[MEAN:.*]] = graph.mul %[[SUM]], %{{.*}} : (tensor<2xf16>, tensor<f16>) -> tensor<2xf16>
// TYPES: graph.cast %[[MEAN]] : tensor<2xf16> to tensor<2xf32>
// TYPES: %[[V16:.*]] = ml_program.global_load @"w/exp_avg_sq" : tensor<2xf16>
// TYPES: graph.cast %[[V16]] : tensor<2xf16> to tensor<2xf32>
// TYPES: ml_program.global_store @"w/exp_avg" = %{{.*}} : tensor<2xf32>
// TYPES: %[[KEEP:.*]] = graph.select %{{.*}} : (tensor<i1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// TYPES: %[[ROUNDED:.*]] = graph.cast %[[KEEP]] : tensor<2xf32> to tensor<2xf16>
// TYPES: ml_program.global_store @"w/exp_avg_sq" = %[[ROUNDED]] : tensor<2xf16> {graph.per_update}
ml_program.global private @w(dense<1.0> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<2xf32>) -> (tensor<f32> {graph.loss}, tensor<2xf32> {graph.gradient_of = @w}) {
  %w = ml_program.global_load_const @w : tensor<2xf32>
  %0 = graph.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = graph.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<2xf32>
}
