// RUN: tessera-opt %s --codegen-order-loops-for-vectors "--codegen-vectorize-contractions=vector-bits=256" --canonicalize | FileCheck %s
// RUN: tessera-opt %s "--codegen-vectorize-contractions=vector-bits=100" --verify-diagnostics

// Tiles sized for 256-bit registers (AVX2), as tessera-compile sizes them
// for such a CPU: the 4x20 matmul's rows are 3 vectors of 8 lanes (the
// last masked to 4), 4 rows x 3 = 12 accumulators, each broadcast weight
// serving 3 FMAs. With the default 512 bits they are 2 vectors of 16.
// CHECK-LABEL: func.func @matmul
// CHECK-NOT: linalg.generic
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.broadcast {{.*}} : f32 to vector<8xf32>
// CHECK: vector.load
// CHECK: vector.load
// CHECK: vector.maskedload
// CHECK-COUNT-12: vector.fma {{.*}} : vector<8xf32>
// CHECK: scf.yield
// expected-error @+1 {{codegen-vectorize-contractions: vector-bits=100 is not a power of two from 64 to 2048}}
module {
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x20xf32>, %c: memref<4x20xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x20xf32>) outs(%c : memref<4x20xf32>)
  return
}
}
