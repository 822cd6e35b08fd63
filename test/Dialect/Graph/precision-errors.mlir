// RUN: tessera-opt %s --graph-precision="precision=fp8" --verify-diagnostics

// expected-error@below {{--precision fp8: use fp32, fp16.32 or fp16.16}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
