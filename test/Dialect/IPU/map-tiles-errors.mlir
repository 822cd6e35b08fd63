// RUN: tessera-opt %s --ipu-map-tiles --split-input-file --verify-diagnostics

// Every plan ipu-map-tiles cannot apply is an error on its op that says
// why. (The plans are hand-written; ipu-plan-tiles makes none of these.)

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{linalg.generic has no #ipu.plan (run ipu-plan-tiles first)}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{'ipu.plan' must be an #ipu.plan}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) attrs = {ipu.plan = 4 : i64} {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{the plan's mapping has rank 2, the op's results 1}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2, 4], tile_strides = [1, 0], first_tile = 0>>} {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{the plan's mapping chunk 0 is 0; chunks must be at least 1}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [0], tile_strides = [1], first_tile = 0>>} {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

// Two pieces with tile stride 0: both on tile 0.
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{the plan's mapping places two pieces on tile 0}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [4], tile_strides = [0], first_tile = 0>>} {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

// Eight pieces of one element on consecutive tiles, on 4 tiles.
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    // expected-error @+1 {{the plan's mapping of [8] in chunks [1] has more pieces than the 4 tiles}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
        ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [1], tile_strides = [1], first_tile = 0>>} {
    ^bb0(%a: f32, %o: f32):
      %n = arith.negf %a : f32
      linalg.yield %n : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

// An epilogue needs a reduction whose only reader is elementwise; this
// sum is returned.
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x4xf32>, %init: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{the plan fuses an epilogue, but the op's result has no elementwise reader that can be one}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<8x4xf32>) outs(%init : tensor<8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2], tile_strides = [1], first_tile = 0>, epilogue>} {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %o, %a : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

// In place needs the init to come from a planned generic.
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8x4xf32>, %init: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{the plan updates the init in place, but it is not the result of a planned linalg.generic used only here}}
    %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
        ins(%x : tensor<8x4xf32>) outs(%init : tensor<8xf32>)
        attrs = {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2], tile_strides = [1], first_tile = 0>, in_place>} {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %o, %a : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<8xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'tensor.extract_slice' has no #ipu.mapping (run ipu-plan-tiles first)}}
    %s = tensor.extract_slice %x[2] [4] [1] : tensor<8xf32> to tensor<4xf32>
    return %s : tensor<4xf32>
  }
}

// -----

// A padded view replaces a fill of the destination; here it is an input.
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<4xf32>, %d: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{a padded view needs a destination filled with a constant, read only by generics}}
    %p = tensor.insert_slice %x into %d[2] [4] [1] {ipu.padded_view} : tensor<4xf32> into tensor<8xf32>
    return %p : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{ipu-map-tiles: the module has no @main}}
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @other() {
    return
  }
}

// -----

// expected-error @+1 {{expected 'epilogue' or 'in_place', got 'banana'}}
func.func private @f() attributes {ipu.plan = #ipu.plan<mapping = #ipu.mapping<chunks = [2], tile_strides = [1], first_tile = 0>, banana>}

// -----

module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
  func.func @main(%x: tensor<4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{rank-reducing inserts are not supported}}
    %p = tensor.insert_slice %x into %d[2, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<8x4xf32>
    return %p : tensor<8x4xf32>
  }
}
