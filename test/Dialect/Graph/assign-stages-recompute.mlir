// RUN: not tessera-opt %s --graph-assign-stages="pipeline=auto num-ipus=2 tiles-per-ipu=2 training=true pipelined=true" 2>&1 | FileCheck %s --check-prefix=STASHED
// RUN: tessera-opt %s --graph-assign-stages="pipeline=auto num-ipus=2 tiles-per-ipu=2 training=true pipelined=true recompute=stage-inputs" | FileCheck %s --check-prefix=RECOMPUTED
// RUN: not tessera-opt %s --graph-assign-stages="pipeline=auto num-ipus=3 tiles-per-ipu=1 training=true pipelined=true recompute=stage-inputs" 2>&1 | FileCheck %s --check-prefix=STILL
//
// A pipelined training step's stage 0 stashes the activations of 2P - 1 = 3
// micro-batches in flight: ten 128 KiB results cannot be cut into two
// stages that fit 2 tiles' 958,464 bytes each (75%). Recomputing each
// stage from its stashed inputs holds one micro-batch's activations, and
// the cut fits; the advice of the error is what makes it fit.

// STASHED: error: --pipeline auto: no cut of the model into 2 stages fits each IPU's 958464 bytes
// STASHED-SAME: use more IPUs (--num-ipus), recomputation (--recompute stage-inputs: each stage stashes only its inputs) or an optimizer with less state
// RECOMPUTED: graph.stages = [{{{.*}}ipu = 0 : i64, ops = {{[4-7]}} : i64, stage = 0 : i64}, {{{.*}}ipu = 1 : i64, ops = {{[3-6]}} : i64, stage = 1 : i64}]
// With recomputation already on, the error no longer suggests it.
// STILL: error: --pipeline auto: no cut of the model into 3 stages fits
// STILL-SAME: use more IPUs (--num-ipus) or an optimizer with less state
func.func @main(%x: tensor<64x512xf32>) -> tensor<64x512xf32> {
  %0 = graph.tanh %x : tensor<64x512xf32>
  %1 = graph.tanh %0 : tensor<64x512xf32>
  %2 = graph.tanh %1 : tensor<64x512xf32>
  %3 = graph.tanh %2 : tensor<64x512xf32>
  %4 = graph.tanh %3 : tensor<64x512xf32>
  %5 = graph.tanh %4 : tensor<64x512xf32>
  %6 = graph.tanh %5 : tensor<64x512xf32>
  %7 = graph.tanh %6 : tensor<64x512xf32>
  %8 = graph.tanh %7 : tensor<64x512xf32>
  %9 = graph.tanh %8 : tensor<64x512xf32>
  return %9 : tensor<64x512xf32>
}
