// RUN: tessera-opt %s --codegen-order-loops-for-vectors --codegen-vectorize-contractions --canonicalize --split-input-file | FileCheck %s

// A 4x20 matmul: one tile of 4 rows x 2 vectors (16 lanes, then 4 masked),
// loaded once, accumulated over k in registers, stored once.
// CHECK-LABEL: func.func @matmul
// CHECK-NOT: linalg.generic
// CHECK-COUNT-4: vector.load {{.*}} vector<16xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4: vector.broadcast {{.*}} : f32 to vector<16xf32>
// CHECK: vector.load
// CHECK: vector.maskedload
// CHECK-COUNT-8: vector.fma
// CHECK: scf.yield
// CHECK: vector.maskedstore
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x20xf32>, %c: memref<4x20xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x20xf32>) outs(%c : memref<4x20xf32>)
  return
}

// -----

// A stride-2 convolution: its input rows are every other element of a load
// of 8 (masked to the 7 that reach the last lane), shuffled out; the weights
// broadcast; one accumulator per output channel (4 rows). Each input element
// takes part in only ~7 products: too few to pay for a phase-split copy.
// CHECK-LABEL: func.func @conv_stride2
// CHECK-NOT: linalg.generic
// CHECK: %[[MASK:.*]] = vector.constant_mask [7] : vector<8xi1>
// CHECK: %[[ROW:.*]] = vector.maskedload {{.*}}, %[[MASK]], {{.*}} into vector<8xf32>
// CHECK: vector.shuffle %[[ROW]], %[[ROW]] [0, 2, 4, 6] : vector<8xf32>, vector<8xf32>
// CHECK-COUNT-4: vector.fma {{.*}} : vector<4xf32>
func.func @conv_stride2(%x: memref<1x3x9x9xf32>, %w: memref<4x3x3x3xf32>, %y: memref<1x4x4x4xf32>) {
  linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%y : memref<1x4x4x4xf32>)
  return
}

// -----

// A stride-2 convolution that reuses each input element enough (16 output
// channels x 9 window positions over 8 x 15 x 15 inputs) reads its input
// through a copy split into phases, made once: per row of 15, a masked load
// of 16, the even elements stored at 16 * row and the odd ones (7 of them)
// at 16 * row + 8. Each output row is then a contiguous (masked) load of
// the copy: no shuffle in the FMA loop.
// CHECK-LABEL: func.func @conv_stride2_phase_split
// CHECK: %[[COPY:.*]] = memref.alloca() : memref<1920xf32>
// CHECK: scf.for {{.*}} to %c120
// CHECK: %[[ROW:.*]] = vector.maskedload {{.*}} into vector<16xf32>
// CHECK: %[[EVEN:.*]] = vector.shuffle %[[ROW]], %[[ROW]] [0, 2, 4, 6, 8, 10, 12, 14]
// CHECK: vector.store %[[EVEN]], %[[COPY]]
// CHECK: %[[ODD:.*]] = vector.shuffle %[[ROW]], %[[ROW]] [1, 3, 5, 7, 9, 11, 13, 15]
// CHECK: vector.maskedstore %[[COPY]][{{.*}}], {{.*}}, %[[ODD]]
// CHECK-NOT: vector.shuffle
// CHECK: vector.maskedload %[[COPY]]
// CHECK-NOT: vector.shuffle
// CHECK: vector.fma
// CHECK-NOT: vector.shuffle
// CHECK: return
func.func @conv_stride2_phase_split(%x: memref<1x8x15x15xf32>, %w: memref<16x8x3x3xf32>, %y: memref<1x16x7x7xf32>) {
  linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x8x15x15xf32>, memref<16x8x3x3xf32>) outs(%y : memref<1x16x7x7xf32>)
  return
}

// -----

// The output's last dimension is 1: the vectors run along the one before,
// which is contiguous (7 lanes of 8, masked).
// CHECK-LABEL: func.func @unit_last_dim
// CHECK-NOT: linalg.generic
// CHECK: vector.maskedload {{.*}} vector<8xf32>
// CHECK: vector.fma {{.*}} : vector<8xf32>
// CHECK: vector.maskedstore
func.func @unit_last_dim(%a: memref<7x5xf32>, %b: memref<5x1xf32>, %c: memref<7x1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (k, j)>,
                                   affine_map<(i, j, k) -> (i, k)>,
                                   affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%b, %a : memref<5x1xf32>, memref<7x5xf32>) outs(%c : memref<7x1xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %y, %x : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not an accumulation (out - x is not associative) and an integer matmul
// are left to convert-linalg-to-loops.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: vector.
func.func @left_alone(%a: memref<4x8xf32>, %c: memref<4xf32>, %ia: memref<4x8xi32>,
                      %ib: memref<8x16xi32>, %ic: memref<4x16xi32>) {
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<4x8xf32>) outs(%c : memref<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.subf %o, %x : f32
    linalg.yield %m : f32
  }
  linalg.matmul ins(%ia, %ib : memref<4x8xi32>, memref<8x16xi32>) outs(%ic : memref<4x16xi32>)
  return
}

// -----

// A kernel generic over its piece's rows (the last, shorter piece of a
// split runs the same code): blocks of 8 rows to the range, the last one's
// rows past the end clamped to the last row (each block one tile of 8
// independent accumulators) and stored only where in range; the columns
// stay static.
// CHECK-LABEL: func.func @dynamic_rows
// CHECK-NOT: linalg.generic
// CHECK: %[[M:.*]] = memref.dim %{{.*}}, %c0 : memref<?x8xf32>
// CHECK: scf.for %[[R0:.*]] = %c0 to %[[M]] step %c8
// CHECK: affine.min #{{.*}}(%[[R0]])[%[[M]]]
// CHECK: scf.for
// CHECK-COUNT-8: vector.fma {{.*}} : vector<16xf32>
// CHECK: scf.yield
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[R0]], %[[M]]
// CHECK: scf.if %[[IN]]
// CHECK: vector.store
// CHECK-NOT: vector.fma
// CHECK: return
func.func @dynamic_rows(%a: memref<?x8xf32>, %b: memref<8x16xf32>, %c: memref<?x16xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x16xf32>) outs(%c : memref<?x16xf32>)
  return
}

// -----

// Generic over its columns: the rows' strides are read from the buffers;
// full tiles of 4 vectors (64 columns) load and store unmasked, then the
// columns left go a vector at a time (a tile of 4 accumulators, one per
// row), masked to the lanes left.
// CHECK-LABEL: func.func @dynamic_columns
// CHECK-NOT: linalg.generic
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c1 : memref<8x?xf32>
// CHECK-DAG: memref.extract_strided_metadata %{{.*}} : memref<4x?xf32>
// CHECK-DAG: memref.extract_strided_metadata %{{.*}} : memref<8x?xf32>
// CHECK: %[[FULL:.*]] = affine.apply #{{.*}}()[%[[N]]]
// CHECK: scf.for %{{.*}} = %c0 to %[[FULL]] step %c64
// CHECK-NOT: vector.mask
// CHECK-COUNT-16: vector.fma
// CHECK-NOT: vector.mask
// CHECK: scf.for %[[C0:.*]] = %[[FULL]] to %[[N]] step %c16
// CHECK: affine.min #{{.*}}(%[[C0]])[%[[N]]]
// CHECK: vector.create_mask
// CHECK: vector.maskedload
// CHECK: scf.for
// CHECK-COUNT-4: vector.fma
// CHECK-COUNT-4: vector.maskedstore
func.func @dynamic_columns(%a: memref<4x8xf32>, %b: memref<8x?xf32>, %c: memref<4x?xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x?xf32>) outs(%c : memref<4x?xf32>)
  return
}

// -----

// A 1x1 convolution's output rows and columns are one run in every operand:
// they merge into one loop of 7 x 3 = 21 (vectors of 16, then 5 masked)
// instead of vectors of 3.
// CHECK-LABEL: func.func @conv_1x1
// CHECK-NOT: linalg.generic
// CHECK: vector.load {{.*}} vector<16xf32>
// CHECK: vector.maskedload {{.*}} vector<16xf32>
// CHECK: vector.fma {{.*}} : vector<16xf32>
// CHECK-NOT: vector<4xf32>
func.func @conv_1x1(%x: memref<1x8x7x3xf32>, %w: memref<4x8x1x1xf32>, %y: memref<1x4x7x3xf32>) {
  linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x8x7x3xf32>, memref<4x8x1x1xf32>) outs(%y : memref<1x4x7x3xf32>)
  return
}

// -----

// A matmul by a transposed matrix: b's row is every 8th element, too far
// apart to shuffle out of one load: a gather.
// CHECK-LABEL: func.func @matmul_transposed
// CHECK: vector.gather {{.*}} : memref<160xf32, strided<[1]>>, vector<16xi32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// CHECK: vector.fma
func.func @matmul_transposed(%a: memref<4x8xf32>, %b: memref<20x8xf32>, %c: memref<4x20xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>,
                                   affine_map<(i, j, k) -> (j, k)>,
                                   affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x8xf32>, memref<20x8xf32>) outs(%c : memref<4x20xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A split reduction's combining step (a sum over 8 partial results) and a
// max pooling window are reductions too: vector adds and maximums into
// accumulators held over the reduction loops.
// CHECK-LABEL: func.func @partial_sums
// CHECK-NOT: linalg.generic
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>)
// CHECK: arith.addf {{.*}} : vector<16xf32>
// CHECK: arith.addf {{.*}} : vector<16xf32>
func.func @partial_sums(%p: memref<8x20x1xf32>, %out: memref<20x1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, x, s) -> (s, c, x)>,
                                   affine_map<(c, x, s) -> (c, x)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p : memref<8x20x1xf32>) outs(%out : memref<20x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %o, %x : f32
    linalg.yield %s : f32
  }
  return
}
// CHECK-LABEL: func.func @max_pool
// CHECK-NOT: linalg.generic
// CHECK: arith.maximumf {{.*}} : vector<8xf32>
func.func @max_pool(%x: memref<2x9x9xf32>, %w: memref<3x3xf32>, %y: memref<2x7x7xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, h, w, kh, kw) -> (c, h + kh, w + kw)>,
                                   affine_map<(c, h, w, kh, kw) -> (kh, kw)>,
                                   affine_map<(c, h, w, kh, kw) -> (c, h, w)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<2x9x9xf32>, memref<3x3xf32>) outs(%y : memref<2x7x7xf32>) {
  ^bb0(%in: f32, %unused: f32, %o: f32):
    %m = arith.maximumf %o, %in : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// A fill that only initializes the output (a vertex zeroing its piece of a
// convolution's partial sums) becomes the accumulators' first value: no
// pass over memory of its own, no load of the output.
// CHECK-LABEL: func.func @fill_folded
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NOT: {{linalg.fill|vector.load}}
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]], %{{.*}} = %[[ZERO]]
// CHECK: vector.store
// CHECK-NOT: linalg.fill
// CHECK: return
func.func @fill_folded(%a: memref<4x8xf32>, %b: memref<8x20xf32>, %out: memref<4x20xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<4x20xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x20xf32>) outs(%out : memref<4x20xf32>)
  return
}

// A copy that only initializes the output (a split convolution's bias,
// which its partial sums are added to): the accumulators load the copy's
// source instead of the output.
// CHECK-LABEL: func.func @copy_folded
// CHECK-SAME: %[[P:.*]]: memref<2x20xf32>, %[[BIAS:.*]]: memref<20xf32>, %[[OUT:.*]]: memref<20xf32>
// CHECK-DAG: %[[FROM:.*]] = memref.reinterpret_cast %[[BIAS]]
// CHECK-DAG: %[[TO:.*]] = memref.reinterpret_cast %[[OUT]]
// CHECK-NOT: linalg.copy
// CHECK: vector.load %[[FROM]]
// CHECK: arith.addf
// CHECK: vector.store {{.*}}, %[[TO]]
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @copy_folded(%p: memref<2x20xf32>, %bias: memref<20xf32>, %out: memref<20xf32>) {
  linalg.copy ins(%bias : memref<20xf32>) outs(%out : memref<20xf32>)
  linalg.generic {indexing_maps = [affine_map<(x, s) -> (s, x)>,
                                   affine_map<(x, s) -> (x)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%p : memref<2x20xf32>) outs(%out : memref<20xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %o, %x : f32
    linalg.yield %s : f32
  }
  return
}

// A fill stays where the reduction does not write every output element
// once (its output map skips a parallel loop: the fill's values are read
// back), or where the reduction also reads the filled buffer.
// CHECK-LABEL: func.func @fill_kept
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<4xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<4x4xf32>)
func.func @fill_kept(%a: memref<4x2x8xf32>, %out: memref<4xf32>, %sq: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>,
                                   affine_map<(i, j, k) -> (i)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a : memref<4x2x8xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %o, %x : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%sq : memref<4x4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>,
                                   affine_map<(i, j, k) -> (k, j)>,
                                   affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%sq, %sq : memref<4x4xf32>, memref<4x4xf32>) outs(%sq : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A convolution tile of 6 output channels of one vector (14 columns) each
// has accumulators to spare: it also spans 2 output rows, the loop the
// broadcast weights do not vary with. Each weight then serves 2 FMAs and
// each input row 6: 12 independent accumulators, 2 vector loads and 6
// broadcasts per step. The 7th output row is a tile of 6 on its own.
// CHECK-LABEL: func.func @conv_two_row_loops
// CHECK: scf.for {{.*}} to %c6 step %c2
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-2: vector.maskedload
// CHECK-COUNT-6: vector.broadcast
// CHECK-COUNT-12: vector.fma
// CHECK: scf.yield
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
func.func @conv_two_row_loops(%x: memref<1x16x9x16xf32>, %w: memref<6x16x3x3xf32>, %y: memref<1x6x7x14xf32>) {
  linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x16x9x16xf32>, memref<6x16x3x3xf32>) outs(%y : memref<1x6x7x14xf32>)
  return
}

// -----

// fp16 factors summed in f32 (fp16.32's partials): each factor is loaded as
// fp16 lanes and widened; the accumulators, the FMAs and the store are f32.
// CHECK-LABEL: func.func @matmul_fp16_f32_partials
// CHECK-NOT: linalg.generic
// CHECK: scf.for {{.*}} -> (vector<16xf32>
// CHECK: vector.broadcast {{.*}} : f16 to vector<16xf16>
// CHECK: arith.extf {{.*}} : vector<16xf16> to vector<16xf32>
// CHECK: vector.load {{.*}} vector<16xf16>
// CHECK: arith.extf {{.*}} : vector<16xf16> to vector<16xf32>
// CHECK: vector.fma {{.*}} : vector<16xf32>
// CHECK: vector.store {{.*}} vector<16xf32>
func.func @matmul_fp16_f32_partials(%a: memref<2x8xf16>, %b: memref<8x16xf16>, %c: memref<2x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>,
                                   affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x8xf16>, memref<8x16xf16>) outs(%c : memref<2x16xf32>) {
  ^bb0(%x: f16, %y: f16, %o: f32):
    %wx = arith.extf %x : f16 to f32
    %wy = arith.extf %y : f16 to f32
    %m = arith.mulf %wx, %wy : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// fp16 partial sums (fp16.16): 32 fp16 lanes, each product and each sum
// rounded to fp16 as the body does (a multiply, then an add; no FMA).
// CHECK-LABEL: func.func @matmul_fp16_partials
// CHECK-NOT: linalg.generic
// CHECK: scf.for {{.*}} -> (vector<32xf16>
// CHECK: %[[P:.*]] = arith.mulf {{.*}} : vector<32xf16>
// CHECK: arith.addf {{.*}}, %[[P]] : vector<32xf16>
// CHECK-NOT: vector.fma
func.func @matmul_fp16_partials(%a: memref<2x8xf16>, %b: memref<8x32xf16>, %c: memref<2x32xf16>) {
  linalg.matmul ins(%a, %b : memref<2x8xf16>, memref<8x32xf16>) outs(%c : memref<2x32xf16>)
  return
}

// -----

// Not a widening the vectorizer knows: a body that does more than widen
// its factors.
// CHECK-LABEL: func.func @fp16_left_alone
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: vector.
func.func @fp16_left_alone(%a: memref<2x8xf16>, %b: memref<8x16xf16>, %d: memref<2x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>,
                                   affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x8xf16>, memref<8x16xf16>) outs(%d : memref<2x16xf32>) {
  ^bb0(%x: f16, %y: f16, %o: f32):
    %wx = arith.extf %x : f16 to f32
    %wy = arith.extf %y : f16 to f32
    %n = arith.negf %wy : f32
    %m = arith.mulf %wx, %n : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
