// RUN: tessera-opt %s --graph-precision="precision=fp8" --verify-diagnostics

// expected-error@below {{--precision must be fp32, fp16.32 (fp16 storage, float partials) or fp16.16 (fp16 storage and partials), got 'fp8'}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
