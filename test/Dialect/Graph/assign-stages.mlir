// RUN: tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=3 layers-per-ipu=1,-1,2" | FileCheck %s --check-prefix=LAYERS
// RUN: tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=2 layers-per-ipu=0,-1" | FileCheck %s --check-prefix=RESERVED
// RUN: tessera-opt %s --split-input-file --graph-assign-stages="pipeline=auto num-ipus=2 tiles-per-ipu=4" | FileCheck %s --check-prefix=AUTO
// RUN: tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=2 blocks=layers.2=1" | FileCheck %s --check-prefix=BLOCKS
// RUN: tessera-opt %s --split-input-file --graph-assign-stages="pipeline=auto num-ipus=2 tiles-per-ipu=4 training=true update-ops-per-element=2000 micro-batches=1" | FileCheck %s --check-prefix=UPDATE
// RUN: tessera-opt %s --split-input-file --graph-assign-stages="pipeline=auto num-ipus=2 tiles-per-ipu=4 training=true update-ops-per-element=0" | FileCheck %s --check-prefix=AUTO
//
// graph-assign-stages places every op of @main: optimum-graphcore's
// layers-per-ipu on the layers found from the op names (the embeddings on
// IPU 0, a head reading the embedding's weight back on IPU 0 as a last
// stage), or the cut the cost model rates fastest. Weights sit with their
// first reader; the module records each stage's figures.

// Four layers "/layers.N/...": 1 on IPU 0, the wildcard takes 1 on IPU 1,
// 2 on IPU 2. The tied head (reading @emb) runs on IPU 0 as stage 3.
// LAYERS-LABEL: module attributes {graph.stages = [{bytes = {{[0-9]+}} : i64, cycles = {{[0-9]+}} : i64, ipu = 0 : i64, ops = 2 : i64, stage = 0 : i64}, {{{.*}}ipu = 1 : i64, ops = 1 : i64, stage = 1 : i64}, {{{.*}}ipu = 2 : i64, ops = 2 : i64, stage = 2 : i64}, {{{.*}}ipu = 0 : i64, ops = 2 : i64, stage = 3 : i64}]}
// LAYERS: ml_program.global_load_const @emb : tensor<16x8xf32> {graph.ipu = 0 : i64, graph.stage = 0 : i64}
// LAYERS: graph.gather {{.*}}graph.ipu = 0 : i64, graph.stage = 0 : i64
// LAYERS: ml_program.global_load_const @w : tensor<8x8xf32> {graph.ipu = 0 : i64, graph.stage = 0 : i64}
// LAYERS: graph.matmul {{.*}}{graph.ipu = 0 : i64, graph.stage = 0 : i64}
// LAYERS: graph.matmul {{.*}}{graph.ipu = 1 : i64, graph.stage = 1 : i64}
// LAYERS: graph.matmul {{.*}}{graph.ipu = 2 : i64, graph.stage = 2 : i64}
// LAYERS: graph.matmul {{.*}}{graph.ipu = 2 : i64, graph.stage = 2 : i64}
// LAYERS: graph.transpose %emb {graph.ipu = 0 : i64, graph.stage = 3 : i64
// LAYERS: graph.matmul {{.*}}{graph.ipu = 0 : i64, graph.stage = 3 : i64}

// A reserved IPU 0 keeps the embeddings alone; the wildcard takes all four
// layers, and the tied head returns to IPU 0.
// RESERVED: graph.gather {{.*}}graph.ipu = 0 : i64, graph.stage = 0 : i64
// RESERVED: graph.matmul {{.*}}{graph.ipu = 1 : i64, graph.stage = 1 : i64}
// RESERVED: graph.matmul {{.*}}{graph.ipu = 1 : i64, graph.stage = 1 : i64}
// RESERVED: graph.matmul {{.*}}{graph.ipu = 0 : i64, graph.stage = 2 : i64}

// PopTorch's BeginBlock by module path: layers.2 and what follows on IPU 1
// (its own stage number, as AutoStage.SameAsIpu).
// BLOCKS: graph.matmul {{.*}}{graph.ipu = 0 : i64, graph.stage = 0 : i64}
// BLOCKS: graph.matmul {{.*}}{graph.ipu = 0 : i64, graph.stage = 0 : i64}
// BLOCKS: graph.matmul {{.*}}{graph.ipu = 1 : i64, graph.stage = 1 : i64}
// BLOCKS: graph.matmul {{.*}}{graph.ipu = 1 : i64, graph.stage = 1 : i64}
// BLOCKS: graph.matmul {{.*}}{graph.ipu = 1 : i64, graph.stage = 1 : i64}

// auto: two stages, the cut balancing the matmuls' cycles.
// AUTO: graph.stages = [{{{.*}}ipu = 0 : i64, ops = 4 : i64, stage = 0 : i64}, {{{.*}}ipu = 1 : i64, ops = 3 : i64, stage = 1 : i64}]
// Training with a costly update (2000 operations per weight element, every
// micro-batch): the embedding's update (128 elements) outweighs the
// layers', and the gather that reads it first is a stage of its own. (The
// same training without an update's cost cuts as AUTO does.)
// UPDATE: graph.stages = [{{{.*}}ipu = 0 : i64, ops = 1 : i64, stage = 0 : i64}, {{{.*}}ipu = 1 : i64, ops = 6 : i64, stage = 1 : i64}]
module {
ml_program.global private @emb(dense<1.0> : tensor<16x8xf32>) : tensor<16x8xf32>
ml_program.global private @w(dense<1.0> : tensor<8x8xf32>) : tensor<8x8xf32>
func.func @main(%ids: tensor<4xi64>) -> tensor<4x16xf32> {
  %emb = ml_program.global_load_const @emb : tensor<16x8xf32>
  %x = graph.gather %emb, %ids {axis = 0 : i64} : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32> loc("/embeddings/Gather")
  %w = ml_program.global_load_const @w : tensor<8x8xf32>
  %0 = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/layers.0/MatMul")
  %1 = graph.matmul %0, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/layers.1/MatMul")
  %2 = graph.matmul %1, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/layers.2/MatMul")
  %3 = graph.matmul %2, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/layers.3/MatMul")
  %et = graph.transpose %emb {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32> loc("/head/Transpose")
  %4 = graph.matmul %3, %et : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("/head/MatMul")
  return %4 : tensor<4x16xf32>
}
}
