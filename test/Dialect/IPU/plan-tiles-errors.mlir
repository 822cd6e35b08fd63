// RUN: tessera-opt %s --ipu-plan-tiles --split-input-file --verify-diagnostics
// RUN: not tessera-opt %s --ipu-plan-tiles=available-memory-proportion=1.5 --split-input-file 2>&1 | FileCheck %s --check-prefix=AMP

// What ipu-plan-tiles cannot plan is an error on the op that says what it
// needs (ipu-prepare-for-mapping makes most of it so).

// AMP: --available-memory-proportion must be in (0, 1], got 1.5

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{tile mapping needs static shapes}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<?xf32>) outs(%x : tensor<?xf32>) {
    ^bb0(%a: f32, %o: f32):
      linalg.yield %a : f32
    } -> tensor<?xf32>
    return %y : tensor<?xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x8xf32>, %o: tensor<8x15xf32>) -> tensor<8x15xf32> {
    // expected-error @+1 {{outputs must be indexed by a projected permutation of the loops}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d0 + d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<8x8xf32>) outs(%o : tensor<8x15xf32>) {
    ^bb0(%a: f32, %b: f32):
      linalg.yield %a : f32
    } -> tensor<8x15xf32>
    return %y : tensor<8x15xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>, %s: f32) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{a scalar operand that is not a constant}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x, %s : tensor<8xf32>, f32) outs(%e : tensor<8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      linalg.yield %m : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>, %s: f32) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{the body reads a non-constant scalar defined outside it}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %s : f32
      linalg.yield %m : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{slices need unit strides and the source's rank (run ipu-prepare-for-mapping first)}}
    %s = tensor.extract_slice %x[0] [2] [2] : tensor<8xf32> to tensor<2xf32>
    return %s : tensor<2xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<4xf32>, %d: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    // expected-error @+1 {{an insert into a value that has other uses}}
    %p = tensor.insert_slice %x into %d[2] [4] [1] : tensor<4xf32> into tensor<8xf32>
    return %p, %d : tensor<8xf32>, tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{cannot place 'linalg.map' on tiles (expected linalg.generic, inserts, reshapes; run ipu-prepare-for-mapping first)}}
    %y = linalg.map { math.exp } ins(%x : tensor<8xf32>) outs(%x : tensor<8xf32>)
    return %y : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{ipu-plan-tiles: the module has no @main}}
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @other() {
    return
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  // expected-error @+1 {{ipu-plan-tiles: @main must be a single block (no control flow)}}
  func.func @main(%c: i1) {
    cf.cond_br %c, ^a, ^b
  ^a:
    return
  ^b:
    return
  }
}

// -----

// A gather's table is held by its readers along its rows, whole or in
// blocks: 16 KB on a chip of 4 KB fits no plan, whatever the split.
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 1024>} {
  ml_program.global private @table(dense<1.0> : tensor<512x8xf32>) : tensor<512x8xf32>
  func.func @main(%ids: tensor<16xi64>) -> tensor<16x8xf32> {
    %table = ml_program.global_load_const @table : tensor<512x8xf32>
    %e = tensor.empty() : tensor<16x8xf32>
    // expected-error @+1 {{the op reads 'tensor<512x8xf32>' at data-dependent places (a gather's table): every vertex's tile must hold 2048 bytes of it, more than a tile's 1024 bytes, and no split of the table's 512 rows into blocks over the tiles fits either (the table is 16384 bytes; the 4 tiles of its IPU hold 4096): use more IPUs (--num-ipus) or a smaller table}}
    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
        ins(%ids : tensor<16xi64>) outs(%e : tensor<16x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<512x8xf32>
      linalg.yield %v : f32
    } -> tensor<16x8xf32>
    return %r : tensor<16x8xf32>
  }
}

// -----

// A loop of size 0 has no tiling: fold-empty-tensors takes such ops out
// first (test/Conversion/FoldEmptyTensors).
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<4x0xf32>, %w: tensor<0x5xf32>, %o: tensor<4x5xf32>) -> tensor<4x5xf32> {
    // expected-error @+1 {{has a loop of size 0 (it computes nothing), which has no tiling}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<4x0xf32>, tensor<0x5xf32>) outs(%o : tensor<4x5xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %c, %m : f32
      linalg.yield %s : f32
    } -> tensor<4x5xf32>
    return %y : tensor<4x5xf32>
  }
}
