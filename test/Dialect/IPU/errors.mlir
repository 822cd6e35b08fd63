// RUN: tessera-opt %s --split-input-file --verify-diagnostics

func.func @wrong_loop(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{result dimension 1 is not a loop of the same range}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 3] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @map_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{access map}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0)>] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @no_kernel(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{needs kernels and one cycle estimate per kernel}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [] cycles [] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @full_input(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{full_inputs names input 3 that does not exist}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [3] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @bad_chunks() -> tensor<8x4xf32> {
  // expected-error @below {{mapping chunks must be positive}}
  %a = ipu.alloc <chunks = [0, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}

// -----

func.func @copy_bounds(%x: tensor<8x4xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{region out of bounds in dimension 0}}
  %c = ipu.copy %x[6, 0] [4, 4] into %y[0, 0] : tensor<8x4xf32> into tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}

// -----

func.func @view_elements(%x: tensor<8x4xf32>) -> tensor<3x10xf32> {
  // expected-error @below {{views need static shapes with the same elements}}
  %v = ipu.view %x : tensor<8x4xf32> to tensor<3x10xf32>
  return %v : tensor<3x10xf32>
}

// -----

func.func @pad_view_shape(%x: tensor<8x4xf32>) -> tensor<10x7xf32> {
  // expected-error @below {{dimension 1: 4 padded by 1 and 1 is not 7}}
  %v = ipu.pad_view %x low [1, 1] high [1, 1] padding 0.0 : f32 : tensor<8x4xf32> to tensor<10x7xf32>
  return %v : tensor<10x7xf32>
}

// -----

func.func @pad_view_value(%x: tensor<8x4xf32>) -> tensor<10x6xf32> {
  // expected-error @below {{padding 0 : i32 is not a 'f32'}}
  %v = ipu.pad_view %x low [1, 1] high [1, 1] padding 0 : i32 : tensor<8x4xf32> to tensor<10x6xf32>
  return %v : tensor<10x6xf32>
}

// -----

func.func @extents_per_input(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{needs one extent list per input, got 2 for 1}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (0, d1)>] full [] extents [array<i64: 8, 1>, array<i64>]
      kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @extents_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{extents of input 0 need one entry per dimension of 'tensor<8x4xf32>'}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (0, d1)>] full [] extents [array<i64: 8>]
      kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func @extent_range(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{extent 9 of input 0 dimension 0 is not in [1, 8]}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (0, d1)>] full [] extents [array<i64: 9, 1>]
      kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// A compute set updates its init in place: no other op may read it.
func.func private @k(index, index, memref<2x4xf32>) attributes {ipu.vertex}
func.func @init_shared(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  // expected-error @below {{init 0 has other uses; the compute set updates it in place}}
  %s = ipu.compute_set "cs0" inits(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s, %x : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Inits update the leading results, in their types.
func.func private @k(index, index, memref<2x4xf32>, memref<2x4xf16>) attributes {ipu.vertex}
func.func @init_of_another_type(%x: tensor<8x4xf16>) -> tensor<8x4xf16> {
  // expected-error @below {{needs an init of each leading result's type (as many as it has inits), or none}}
  %s:2 = ipu.compute_set "cs0" inits(%x : tensor<8x4xf16>) loops [8, 4] outputs [0, 1]
      maps [] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>, tensor<8x4xf16>
  return %s#1 : tensor<8x4xf16>
}

// -----

func.func @copy_dest_shared(%x: tensor<4xf32>, %d: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @below {{dest has other uses; the copy updates it in place}}
  %c = ipu.copy %x[0] [4] into %d[2] : tensor<4xf32> into tensor<8xf32>
  return %c, %d : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @missing_kernel(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{kernel @nowhere is not a func.func marked ipu.vertex}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [@nowhere] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func private @not_a_vertex(index, index, memref<2x4xf32>, memref<2x4xf32>)
func.func @kernel_not_vertex(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{kernel @not_a_vertex is not a func.func marked ipu.vertex}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [@not_a_vertex] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// Chunks of 3 rows over 8 give pieces of 3 and 2 rows: two kernels.
func.func private @k(index, index, memref<?x4xf32>, memref<?x4xf32>) attributes {ipu.vertex}
func.func @kernel_per_shape(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{has 1 kernels for the 2 piece shapes of its mapping}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [3, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func private @k(index, index, memref<2x4xf32>, memref<3x4xf32>) attributes {ipu.vertex}
func.func @kernel_piece_shape(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{kernel @k of type '(index, index, memref<2x4xf32>, memref<3x4xf32>) -> ()' does not take 2 loop offsets, 1 input regions and 1 output pieces of shape [2, 4]}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

func.func private @k(index, memref<2x4xf32>, memref<2x4xf32>) attributes {ipu.vertex}
func.func @kernel_arguments(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{does not take 2 loop offsets, 1 input regions and 1 output pieces}}
  %s = ipu.compute_set "cs0" ins(%x : tensor<8x4xf32>) loops [8, 4] outputs [0, 1]
      maps [affine_map<(d0, d1) -> (d0, d1)>] full [] kernels [@k] cycles [1] macs 0
      mapping <chunks = [2, 4], tile_strides = [1, 0], first_tile = 0> : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// expected-error @below {{unknown target 'banana'; targets are ipu1, ipu2, bow}}
module attributes {ipu.target = #ipu.target<"banana", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 638976>} {
}

// -----

// expected-error @below {{--tiles-per-ipu must be between 1 and 1472 for ipu2, got 0}}
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 0, bytes_per_tile = 638976>} {
}

// -----

// expected-error @below {{bytes_per_tile must be between 1024 and 638976 for ipu2, got 100}}
module attributes {ipu.target = #ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 4, bytes_per_tile = 100>} {
}

// -----

func.func @sum_of_integers(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @below {{sums floats, got 'tensor<4xi32>'}}
  %s = ipu.cross_replica_sum %x : tensor<4xi32> -> tensor<4xi32>
  return %s : tensor<4xi32>
}

// -----

func.func @sum_changes_type(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @below {{result type 'tensor<2x2xf32>' differs from its input's 'tensor<4xf32>'}}
  %s = ipu.cross_replica_sum %x : tensor<4xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}

// -----

func.func @sum_mappings(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{ipu.mappings must hold one #ipu.mapping per result}}
  %s:2 = ipu.cross_replica_sum %x, %y {ipu.mappings = [#ipu.mapping<chunks = [4], tile_strides = [0], first_tile = 0>]} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return %s#0 : tensor<4xf32>
}
