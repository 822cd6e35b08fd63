# GridSample and RoiAlign become elementwise coordinate arithmetic plus one
# gather of all interpolation taps, weighted and summed.
# RUN: %python %s %t
# RUN: tessera-compile %t/bilinear.onnx --compile-to=input | FileCheck %s --check-prefix=BILINEAR
# RUN: tessera-compile %t/nearest.onnx --compile-to=input | FileCheck %s --check-prefix=NEAREST
# RUN: tessera-compile %t/bicubic.onnx --compile-to=input | FileCheck %s --check-prefix=BICUBIC
# RUN: tessera-compile %t/roialign.onnx --compile-to=input | FileCheck %s --check-prefix=ROI
# RUN: not tessera-compile %t/volumetric.onnx 2>&1 | FileCheck %s --check-prefix=RANK
# RUN: not tessera-compile %t/bad_padding.onnx 2>&1 | FileCheck %s --check-prefix=PADDING
# RUN: not tessera-compile %t/roialign_adaptive.onnx 2>&1 | FileCheck %s --check-prefix=ADAPTIVE
import numpy as np
from onnx_gen import T, init, node, save, vi

# Bilinear with zeros padding: 2 taps per axis crossed into 4 pixels of each
# of the 30 samples; pixels outside read index 12, a zero appended to the
# flattened 3x4 image.
# BILINEAR: %[[GRID:.*]] = graph.reshape %arg1 : tensor<1x5x6x2xf32> -> tensor<1x30x2xf32>
# BILINEAR: graph.floor
# BILINEAR: graph.add %{{.*}}, %{{.*}} : (tensor<1x2x1x30xi64>, tensor<1x1x2x30xi64>) -> tensor<1x2x2x30xi64>
# BILINEAR: %[[OUT:.*]] = graph.constant dense<12> : tensor<i64>
# BILINEAR: %[[IDX:.*]] = graph.select %{{.*}}, %{{.*}}, %[[OUT]] : (tensor<1x1x120xi1>, tensor<1x1x120xi64>, tensor<i64>) -> tensor<1x1x120xi64>
# BILINEAR: %[[FULL:.*]] = graph.expand %[[IDX]] : tensor<1x1x120xi64> -> tensor<1x2x120xi64>
# BILINEAR: %[[FLAT:.*]] = graph.reshape %arg0 : tensor<1x2x3x4xf32> -> tensor<1x2x12xf32>
# BILINEAR: %[[PADDED:.*]] = graph.concat %[[FLAT]], %{{.*}} {axis = 2 : i64} : (tensor<1x2x12xf32>, tensor<1x2x1xf32>) -> tensor<1x2x13xf32>
# BILINEAR: %[[PIX:.*]] = graph.gather_elements %[[PADDED]], %[[FULL]] {axis = 2 : i64} : (tensor<1x2x13xf32>, tensor<1x2x120xi64>) -> tensor<1x2x120xf32>
# BILINEAR: %[[W:.*]] = graph.mul %[[PIX]], %{{.*}} : (tensor<1x2x120xf32>, tensor<1x1x120xf32>) -> tensor<1x2x120xf32>
# BILINEAR: %[[TAPS:.*]] = graph.reshape %[[W]] : tensor<1x2x120xf32> -> tensor<1x2x4x30xf32>
# BILINEAR: %[[SUM:.*]] = graph.reduce_sum %[[TAPS]] {axes = array<i64: 2>, keepdims = false}
# BILINEAR: graph.reshape %[[SUM]] : tensor<1x2x30xf32> -> tensor<1x2x5x6xf32>
save("bilinear", [node("GridSample", ["x", "grid"], ["y"])],
     [vi("x", T.FLOAT, [1, 2, 3, 4]), vi("grid", T.FLOAT, [1, 5, 6, 2])],
     [vi("y", T.FLOAT, [1, 2, 5, 6])], opset=16)

# Nearest rounds half to even and reads one pixel per sample: no weights, no
# sum. Border padding clamps into the image, so nothing is appended to it.
# NEAREST: graph.round
# NEAREST: graph.clamp %{{.*}} {max = 2.000000e+00 : f64, min = 0.000000e+00 : f64}
# NEAREST-NOT: graph.concat
# NEAREST: graph.gather_elements %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x1x12xf32>, tensor<2x1x12xi64>) -> tensor<2x1x12xf32>
# NEAREST-NOT: graph.reduce_sum
# NEAREST: graph.reshape %{{.*}} : tensor<2x1x12xf32> -> tensor<2x1x3x4xf32>
save("nearest", [node("GridSample", ["x", "grid"], ["y"], mode="nearest",
                      padding_mode="border", align_corners=1)],
     [vi("x", T.FLOAT, [2, 1, 3, 4]), vi("grid", T.FLOAT, [2, 3, 4, 2])],
     [vi("y", T.FLOAT, [2, 1, 3, 4])], opset=16)

# Bicubic reads a 4x4 neighbourhood; reflection reflects repeatedly (floor
# of distance over range, parity by rem). An f64 grid makes the arithmetic
# f64; the result is cast back to X's type.
# BICUBIC: graph.rem
# BICUBIC: graph.gather_elements %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<1x3x20xf64>, tensor<1x3x32xi64>) -> tensor<1x3x32xf64>
# BICUBIC: graph.reshape %{{.*}} : tensor<1x3x32xf64> -> tensor<1x3x16x2xf64>
# BICUBIC: graph.cast %{{.*}} : tensor<1x3x1x2xf64> to tensor<1x3x1x2xf16>
save("bicubic", [node("GridSample", ["x", "grid"], ["y"], mode="bicubic",
                      padding_mode="reflection")],
     [vi("x", T.FLOAT16, [1, 3, 4, 5]), vi("grid", T.DOUBLE, [1, 1, 2, 2])],
     [vi("y", T.FLOAT16, [1, 3, 1, 2])], opset=16)

# RoiAlign gathers rows of X as [N*H*W, C] at [rois, OH, GH, OW, GW, 4
# neighbours] and averages over the bin's samples and neighbours.
# ROI: %[[T:.*]] = graph.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : tensor<2x4x8x8xf32> -> tensor<2x8x8x4xf32>
# ROI: %[[TABLE:.*]] = graph.reshape %[[T]] : tensor<2x8x8x4xf32> -> tensor<128x4xf32>
# ROI: %[[PIX:.*]] = graph.gather %[[TABLE]], %{{.*}} {axis = 0 : i64} : (tensor<128x4xf32>, tensor<3x2x2x3x2x4xi64>) -> tensor<3x2x2x3x2x4x4xf32>
# ROI: %[[W:.*]] = graph.mul %[[PIX]], %{{.*}} : (tensor<3x2x2x3x2x4x4xf32>, tensor<3x2x2x3x2x4x1xf32>) -> tensor<3x2x2x3x2x4x4xf32>
# ROI: graph.reduce_sum %[[W]] {axes = array<i64: 2, 4, 5>, keepdims = false} : (tensor<3x2x2x3x2x4x4xf32>) -> tensor<3x2x3x4xf32>
# ROI: graph.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>} : tensor<3x2x3x4xf32> -> tensor<3x4x2x3xf32>
save("roialign", [node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=2,
                       output_width=3, sampling_ratio=2)],
     [vi("x", T.FLOAT, [2, 4, 8, 8]), vi("rois", T.FLOAT, [3, 4]), vi("b", T.INT64, [3])],
     [vi("y", T.FLOAT, [3, 4, 2, 3])], opset=16)

# RANK: error: GridSample: X has rank 5; only 4-D X (N x C x H x W) is supported yet, not volumetric or N-D sampling
save("volumetric", [node("GridSample", ["x", "grid"], ["y"])],
     [vi("x", T.FLOAT, [1, 2, 3, 4, 5]), vi("grid", T.FLOAT, [1, 2, 2, 2, 3])],
     [vi("y", T.FLOAT, [1, 2, 2, 2, 2])], opset=16, check=False)

# PADDING: error: GridSample: padding_mode must be zeros, border or reflection, got 'wrap'
save("bad_padding", [node("GridSample", ["x", "grid"], ["y"], padding_mode="wrap")],
     [vi("x", T.FLOAT, [1, 2, 3, 4]), vi("grid", T.FLOAT, [1, 5, 6, 2])],
     [vi("y", T.FLOAT, [1, 2, 5, 6])], opset=16, check=False)

# sampling_ratio 0 sizes each bin's grid from the regions, which must then
# be known at compile time.
# ADAPTIVE: error: RoiAlign: input 'rois' must be a constant float tensor {{.*}} --constant-input rois=FILE; with sampling_ratio 0 the number of samples per bin depends on the regions' sizes
save("roialign_adaptive", [node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=2,
                                output_width=3)],
     [vi("x", T.FLOAT, [2, 4, 8, 8]), vi("rois", T.FLOAT, [3, 4]), vi("b", T.INT64, [3])],
     [vi("y", T.FLOAT, [3, 4, 2, 3])], opset=16)
