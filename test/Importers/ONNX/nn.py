# RUN: %python %s %t
# RUN: tessera-compile %t/conv.onnx --compile-to=input | FileCheck %s --check-prefix=CONV
# RUN: tessera-compile %t/pool.onnx --compile-to=input | FileCheck %s --check-prefix=POOL
# RUN: tessera-compile %t/gemm.onnx --compile-to=input | FileCheck %s --check-prefix=GEMM
# RUN: tessera-compile %t/norms.onnx --compile-to=input | FileCheck %s --check-prefix=NORM
# RUN: tessera-compile %t/softmax11.onnx --compile-to=input | FileCheck %s --check-prefix=SM11
# RUN: tessera-compile %t/softmax13.onnx --compile-to=input | FileCheck %s --check-prefix=SM13
# RUN: tessera-compile %t/global_pool.onnx --compile-to=input | FileCheck %s --check-prefix=GP
# RUN: tessera-compile %t/layernorm_stats.onnx --compile-to=graph | FileCheck %s --check-prefix=LNSTATS
# RUN: tessera-compile %t/sce_loss.onnx --compile-to=graph | FileCheck %s --check-prefix=SCE
import numpy as np
from onnx_gen import T, init, node, save, vi

rng = np.random.default_rng(0)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)

# Weights become private ml_program globals; auto_pad resolves to pads.
# CONV: ml_program.global private @w(dense_resource<w> : tensor<8x3x3x3xf32>)
# CONV-DAG: %[[W:.*]] = ml_program.global_load_const @w : tensor<8x3x3x3xf32>
# CONV-DAG: %[[B:.*]] = ml_program.global_load_const @b : tensor<8xf32>
# CONV: graph.conv %arg0, %[[W]], %[[B]] {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x10x10xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x8x5x5xf32>
# CONV: graph.conv {{.*}}groups = 8 : i64, pads = array<i64: 2, 2, 2, 2>{{.*}} -> tensor<1x8x5x5xf32>
save("conv", [
    node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], auto_pad="SAME_UPPER"),
    node("Conv", ["c", "dw"], ["out"], group=8, pads=[2, 2, 2, 2], dilations=[2, 2]),
], [vi("x", T.FLOAT, [1, 3, 10, 10])], [vi("out", T.FLOAT, [1, 8, 5, 5])],
    [init("w", f32(8, 3, 3, 3)), init("b", f32(8)), init("dw", f32(8, 1, 3, 3))])

# POOL: graph.max_pool %arg0 {ceil_mode = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32>
# POOL: graph.avg_pool %{{.*}} {ceil_mode = false, count_include_pad = true, {{.*}}pads = array<i64: 1, 1, 1, 1>{{.*}} -> tensor<1x2x4x4xf32>
save("pool", [
    node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    node("AveragePool", ["m"], ["out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
         count_include_pad=1),
], [vi("x", T.FLOAT, [1, 2, 8, 8])], [vi("out", T.FLOAT, [1, 2, 4, 4])])

# Gemm decomposes: transB, alpha and beta become explicit ops.
# GEMM: %[[T:.*]] = graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
# GEMM: %[[M:.*]] = graph.matmul %arg0, %[[T]] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
# GEMM: %[[A:.*]] = graph.mul %[[M]], %{{.*}} : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
# GEMM: %[[C:.*]] = graph.mul %{{.*}}, %{{.*}} : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
# GEMM: graph.add %[[A]], %[[C]] : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
save("gemm", [node("Gemm", ["a", "b", "c"], ["out"], transB=1, alpha=2.0, beta=0.5)],
     [vi("a", T.FLOAT, [3, 4])], [vi("out", T.FLOAT, [3, 5])],
     [init("b", f32(5, 4)), init("c", f32(5))])

# NORM: graph.batch_norm {{.*}} {epsilon = 0.0010000000474974513 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32>
# NORM: graph.group_norm {{.*}} {epsilon = {{.*}} : f64, num_groups = 4 : i64}
# A missing LayerNormalization bias is zeros.
# NORM: %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<3xf32>
# NORM: graph.layer_norm %{{.*}}, %{{.*}}, %[[Z]] {axis = 3 : i64, epsilon = 1.000000e-05 : f64}
save("norms", [
    node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
    node("InstanceNormalization", ["bn", "s", "b"], ["in"]),
    node("LayerNormalization", ["in", "g"], ["out"], axis=-1),
], [vi("x", T.FLOAT, [2, 4, 3, 3])], [vi("out", T.FLOAT, [2, 4, 3, 3])],
    [init("s", f32(4)), init("b", f32(4)), init("m", f32(4)),
     init("v", np.abs(f32(4))), init("g", f32(3))])

# Before opset 13 Softmax flattens to 2-D at `axis`.
# SM11: graph.reshape %arg0 : tensor<2x3x4xf32> -> tensor<2x12xf32>
# SM11: graph.softmax %{{.*}} {axis = 1 : i64} : tensor<2x12xf32>
# SM11: graph.reshape %{{.*}} : tensor<2x12xf32> -> tensor<2x3x4xf32>
save("softmax11", [node("Softmax", ["x"], ["out"], axis=1)],
     [vi("x", T.FLOAT, [2, 3, 4])], [vi("out", T.FLOAT, [2, 3, 4])], opset=11)
# SM13: graph.softmax %arg0 {axis = 1 : i64} : tensor<2x3x4xf32>
save("softmax13", [node("Softmax", ["x"], ["out"], axis=1)],
     [vi("x", T.FLOAT, [2, 3, 4])], [vi("out", T.FLOAT, [2, 3, 4])], opset=13)

# GP: graph.reduce_mean %arg0 {axes = array<i64: 2, 3>, keepdims = true} : (tensor<1x2x5x5xf32>) -> tensor<1x2x1x1xf32>
# GP: graph.reduce_max %{{.*}} {axes = array<i64: 2, 3>, keepdims = true}
save("global_pool", [node("GlobalAveragePool", ["x"], ["a"]),
                     node("GlobalMaxPool", ["a"], ["out"])],
     [vi("x", T.FLOAT, [1, 2, 5, 5])], [vi("out", T.FLOAT, [1, 2, 1, 1])])

# LayerNormalization's optional Mean and InvStdDev outputs, with the
# normalised dims kept as 1.
# LNSTATS: func.func @main(%arg0: tensor<2x3x4xf32> {graph.name = "x"}) -> (tensor<2x3x4xf32> {graph.name = "y"}, tensor<2x1x1xf32> {graph.name = "mean"}, tensor<2x1x1xf32> {graph.name = "invstd"})
# LNSTATS: graph.layer_norm {{.*}}axis = 1
# LNSTATS: graph.reduce_mean %arg0 {axes = array<i64: 1, 2>, keepdims = true}
# LNSTATS: graph.rsqrt
save("layernorm_stats", [node("LayerNormalization", ["x", "g"], ["y", "mean", "invstd"], axis=1)],
     [vi("x", T.FLOAT, [2, 3, 4])],
     [vi("y", T.FLOAT, [2, 3, 4]), vi("mean", T.FLOAT, [2, 1, 1]), vi("invstd", T.FLOAT, [2, 1, 1])],
     [init("g", f32(3, 4))])

# SoftmaxCrossEntropyLoss = log_softmax + NLL: the target picks one class per
# sample (gather_elements), ignored samples get weight 0, and "mean" divides
# by the summed weights.
# SCE: func.func @main(%arg0: tensor<4x5xf32> {graph.name = "scores"}, %arg1: tensor<4xi64> {graph.name = "labels"}) -> (tensor<f32> {graph.name = "loss"})
# SCE: %[[LOGP:.*]] = graph.log_softmax %arg0 {axis = 1 : i64}
# SCE: %[[IGN:.*]] = graph.equal %arg1
# SCE: graph.gather_elements %[[LOGP]], %{{.*}} {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
# SCE: %[[SUM:.*]] = graph.reduce_sum {{.*}} -> tensor<f32>
# SCE: %[[W:.*]] = graph.reduce_sum {{.*}} -> tensor<f32>
# SCE: graph.div %[[SUM]], %[[W]]
save("sce_loss", [node("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss"],
                       reduction="mean", ignore_index=2)],
     [vi("scores", T.FLOAT, [4, 5]), vi("labels", T.INT64, [4])], [vi("loss", T.FLOAT, [])])
