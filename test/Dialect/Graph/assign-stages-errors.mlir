// RUN: tessera-opt %s --split-input-file --verify-diagnostics --graph-assign-stages="num-ipus=2"
//
// Every way a placement can be wrong is an error naming the op (or the
// option) and what to change.

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{has a pipeline stage (1) but no IPU: annotate both}}
  %0 = graph.relu %x {graph.stage = 1 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note@+1 {{the value is computed here}}
  %0 = graph.relu %x {graph.ipu = 1 : i64, graph.stage = 1 : i64} : tensor<4xf32>
  // expected-error@+1 {{the op in pipeline stage 0 (IPU 0) reads a value computed in the later stage 1 (IPU 1)}}
  %1 = graph.neg %0 {graph.ipu = 0 : i64, graph.stage = 0 : i64} : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{the op is placed on IPU 2 but there are 2 IPUs (IPUs count from 0)}}
  %0 = graph.relu %x {graph.ipu = 2 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note@+1 {{the stage's first op}}
  %0 = graph.relu %x {graph.ipu = 0 : i64, graph.stage = 0 : i64} : tensor<4xf32>
  // expected-error@+1 {{the op is on IPU 1 but its pipeline stage 0 runs on IPU 0}}
  %1 = graph.neg %0 {graph.ipu = 1 : i64, graph.stage = 0 : i64} : tensor<4xf32>
  return %1 : tensor<4xf32>
}
