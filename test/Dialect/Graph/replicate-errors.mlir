// RUN: tessera-opt %s --split-input-file --verify-diagnostics --graph-replicate="replicas=2"
// RUN: not tessera-opt %s --split-input-file --graph-replicate="replicas=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not tessera-opt %s --split-input-file --graph-replicate="replicas=2 reduction=max" 2>&1 | FileCheck %s --check-prefix=REDUCTION
//
// Out-of-range options name the option and the values it takes; a model
// whose own global takes the replica index's name is told so.

// ZERO: replicas must be in [1, 1024], got 0
// REDUCTION: the replicas' gradients combine by mean or sum, got 'max'

// expected-error @+1 {{replication needs the global 'replica.index', which the model already uses for something else}}
module {
  ml_program.global private @replica.index(dense<0> : tensor<i64>) : tensor<i64>
  func.func @main(%seed: tensor<i64>, %counter: tensor<i64>) -> tensor<2xf32> {
    %u = graph.random_uniform %seed, %counter {high = 1.0 : f64, low = 0.0 : f64, stream = 0 : i64} : (tensor<i64>, tensor<i64>) -> tensor<2xf32>
    return %u : tensor<2xf32>
  }
}
