// RUN: tessera-opt %s --graph-precision="precision=fp16.16 partials-type=float" --verify-diagnostics

// The precision's second number is its partials type: another is an error.
// expected-error@below {{--precision fp16.16 has half partials, not float: use --precision fp16.32 for fp16 storage with float partials}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
