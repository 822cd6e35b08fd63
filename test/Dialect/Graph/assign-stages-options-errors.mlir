// RUN: tessera-opt %s --split-input-file --verify-diagnostics --graph-assign-stages="num-ipus=2 layers-per-ipu=1,2"
// RUN: not tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=2 layers-per-ipu=-1,-2" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=3 layers-per-ipu=1,-1" 2>&1 | FileCheck %s --check-prefix=ENTRIES
// RUN: not tessera-opt %s --split-input-file --graph-assign-stages="pipeline=auto num-ipus=2 tiles-per-ipu=1" 2>&1 | FileCheck %s --check-prefix=FIT
// RUN: not tessera-opt %s --split-input-file --graph-assign-stages="pipeline=sideways" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=2 blocks=layers.7=1" 2>&1 | FileCheck %s --check-prefix=NO-BLOCK
// RUN: not tessera-opt %s --split-input-file --graph-assign-stages="num-ipus=2 blocks=layers.1" 2>&1 | FileCheck %s --check-prefix=BAD-BLOCK
//
// layers-per-ipu must match the layers the op names show; auto must find a
// cut that fits; both say what to change.

// COUNT: -2 is not a layer count (0 or more, or -1 for the rest)
// ENTRIES: --layers-per-ipu 1,-1 has 2 entries but --num-ipus is 3: give one per IPU
// FIT: --pipeline auto: no cut of the model into 2 stages fits each IPU's 479232 bytes for weights and inputs received (75% of its memory; the rest holds code and temporaries)
// FIT-SAME: stage 0 (IPU 0) would need 800000 bytes
// FIT-SAME: use more IPUs (--num-ipus)
// MODE: pipeline is 'sideways'; use manual (annotations or layers-per-ipu) or auto
// NO-BLOCK: no op of the model lies under block 'layers.7'
// BAD-BLOCK: block 'layers.1' is not PATH=IPU or PATH=IPU:STAGE

// expected-error@+1 {{--layers-per-ipu 1,2 places 3 layers but the model has 2 ('layers/0' ... 'layers/1'); use -1 on an IPU to take the rest}}
module {
ml_program.global private @w(dense<1.0> : tensor<1000x200xf32>) : tensor<1000x200xf32>
func.func @main(%x: tensor<4x1000xf32>) -> tensor<4x200xf32> {
  %w = ml_program.global_load_const @w : tensor<1000x200xf32>
  %0 = graph.matmul %x, %w : (tensor<4x1000xf32>, tensor<1000x200xf32>) -> tensor<4x200xf32> loc("/layers.0/MatMul")
  %1 = graph.relu %0 : tensor<4x200xf32> loc("/layers.1/Relu")
  return %1 : tensor<4x200xf32>
}
}

// -----

// expected-error@+1 {{found no repeated layers in the model's op names}}
module {
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.relu %x : tensor<4xf32> loc("/encoder/Relu")
  return %0 : tensor<4xf32>
}
}
