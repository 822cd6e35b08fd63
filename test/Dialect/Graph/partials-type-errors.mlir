// RUN: tessera-opt %s --graph-precision="partials-type=quarter" --verify-diagnostics

// expected-error@below {{--partials-type must be float or half, got 'quarter'}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
