//===- GraphOps.td - graph dialect operations ---------------*- tablegen -*-===//
//
// Operators of the graph dialect. Conventions every op keeps:
//  - operands and results are ranked tensors; shapes may hold `?` only before
//    `graph-infer-shapes` has run on a model whose inputs are still symbolic;
//  - axes are non-negative (importers normalise negative ONNX/Torch axes);
//  - convolution and pooling use channels-first layout (N, C, spatial...) and
//    carry every attribute explicitly (no defaults to look up later);
//  - the result type of every op except reshape, expand, cast and resize is
//    inferred (InferTypeOpInterface), and verified against what is written.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_GRAPHOPS_TD
#define TESSERA_DIALECT_GRAPH_IR_GRAPHOPS_TD

include "tessera/Dialect/Graph/IR/GraphBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "A small tensor constant";
  let description = [{
    A literal tensor. Importers use it for shape operands, scalars and other
    small values; parameters and large payloads are `ml_program.global`s so
    that they are not hashed and uniqued by the context.

    ```mlir
    %c = graph.constant dense<[1, 2048]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise unary operators
//===----------------------------------------------------------------------===//

class Graph_UnaryOp<string mnemonic, Type tensorType, string doc,
                    list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure, Elementwise,
                                      SameOperandsAndResultType], traits)> {
  let summary = "Elementwise " # mnemonic;
  let description = doc;
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Graph_NegOp : Graph_UnaryOp<"neg", Graph_NumericTensor, "`-x`">;
def Graph_AbsOp : Graph_UnaryOp<"abs", Graph_NumericTensor, "`|x|`">;
def Graph_SignOp : Graph_UnaryOp<"sign", Graph_NumericTensor,
  "-1, 0 or 1 with the sign of `x` (NaN stays NaN).">;
def Graph_ExpOp : Graph_UnaryOp<"exp", Graph_FloatTensor, "`e^x`">;
def Graph_LogOp : Graph_UnaryOp<"log", Graph_FloatTensor, "natural logarithm">;
def Graph_SqrtOp : Graph_UnaryOp<"sqrt", Graph_FloatTensor, "square root">;
def Graph_RsqrtOp : Graph_UnaryOp<"rsqrt", Graph_FloatTensor, "`1 / sqrt(x)`">;
def Graph_ReciprocalOp : Graph_UnaryOp<"reciprocal", Graph_FloatTensor, "`1 / x`">;
def Graph_TanhOp : Graph_UnaryOp<"tanh", Graph_FloatTensor, "hyperbolic tangent">;
def Graph_SigmoidOp : Graph_UnaryOp<"sigmoid", Graph_FloatTensor, "`1 / (1 + e^-x)`">;
def Graph_ErfOp : Graph_UnaryOp<"erf", Graph_FloatTensor, "Gauss error function">;
def Graph_SinOp : Graph_UnaryOp<"sin", Graph_FloatTensor, "sine">;
def Graph_CosOp : Graph_UnaryOp<"cos", Graph_FloatTensor, "cosine">;
def Graph_AtanOp : Graph_UnaryOp<"atan", Graph_FloatTensor,
  "arc tangent (asin and acos are built from it)">;
def Graph_FloorOp : Graph_UnaryOp<"floor", Graph_FloatTensor, "round down">;
def Graph_CeilOp : Graph_UnaryOp<"ceil", Graph_FloatTensor, "round up">;
def Graph_RoundOp : Graph_UnaryOp<"round", Graph_FloatTensor,
  "round half to even (ONNX Round)">;
def Graph_ReluOp : Graph_UnaryOp<"relu", Graph_NumericTensor, "`max(x, 0)`">;
def Graph_NotOp : Graph_UnaryOp<"not", Graph_BoolTensor, "logical not">;
def Graph_SoftplusOp : Graph_UnaryOp<"softplus", Graph_FloatTensor, "`log(1 + e^x)`">;
def Graph_HardSwishOp : Graph_UnaryOp<"hard_swish", Graph_FloatTensor,
  "`x * max(0, min(1, x / 6 + 1 / 2))`">;

class Graph_UnaryAlphaOp<string mnemonic, string doc>
    : Graph_UnaryOp<mnemonic, Graph_FloatTensor, doc> {
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$alpha);
}
def Graph_LeakyReluOp : Graph_UnaryAlphaOp<"leaky_relu",
  "`x` if `x >= 0`, else `alpha * x`">;
def Graph_EluOp : Graph_UnaryAlphaOp<"elu",
  "`x` if `x >= 0`, else `alpha * (e^x - 1)`">;

def Graph_HardSigmoidOp : Graph_UnaryOp<"hard_sigmoid", Graph_FloatTensor,
    "`max(0, min(1, alpha * x + beta))`"> {
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$alpha, F64Attr:$beta);
}

def Graph_ClampOp : Graph_UnaryOp<"clamp", Graph_NumericTensor,
    "`min(max(x, min), max)`; a missing bound is unbounded. Integer tensors "
    "compare against the bound converted to their type."> {
  let arguments = (ins Graph_NumericTensor:$input, OptionalAttr<F64Attr>:$min,
                   OptionalAttr<F64Attr>:$max);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise binary operators (NumPy broadcasting)
//===----------------------------------------------------------------------===//

class Graph_BroadcastOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptorWithIsCompatible], traits)> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

class Graph_BinaryOp<string mnemonic, Type tensorType, string doc,
                     list<Trait> traits = []>
    : Graph_BroadcastOp<mnemonic, traits> {
  let summary = "Elementwise " # mnemonic # " with NumPy broadcasting";
  let description = doc # [{

    Operands share an element type; their shapes broadcast NumPy-style
    (aligned at the trailing dimension, size-1 dimensions stretch) to the
    result shape.
  }];
  let arguments = (ins tensorType:$lhs, tensorType:$rhs);
  let results = (outs tensorType:$result);
}

def Graph_AddOp : Graph_BinaryOp<"add", Graph_NumericTensor, "`lhs + rhs`", [Commutative]>;
def Graph_SubOp : Graph_BinaryOp<"sub", Graph_NumericTensor, "`lhs - rhs`">;
def Graph_MulOp : Graph_BinaryOp<"mul", Graph_NumericTensor, "`lhs * rhs`", [Commutative]>;
def Graph_DivOp : Graph_BinaryOp<"div", Graph_NumericTensor,
  "`lhs / rhs`; integer division truncates toward zero (ONNX Div).">;
def Graph_RemOp : Graph_BinaryOp<"rem", Graph_NumericTensor,
  "Remainder with the sign of the dividend (C fmod, ONNX Mod with fmod=1).">;
def Graph_PowOp : Graph_BinaryOp<"pow", Graph_NumericTensor, "`lhs ^ rhs`">;
def Graph_MaxOp : Graph_BinaryOp<"max", Graph_NumericTensor,
  "larger of the two (NaN propagates)", [Commutative]>;
def Graph_MinOp : Graph_BinaryOp<"min", Graph_NumericTensor,
  "smaller of the two (NaN propagates)", [Commutative]>;
def Graph_AndOp : Graph_BinaryOp<"and", Graph_IntOrBoolTensor, "bitwise/logical and", [Commutative]>;
def Graph_OrOp : Graph_BinaryOp<"or", Graph_IntOrBoolTensor, "bitwise/logical or", [Commutative]>;
def Graph_XorOp : Graph_BinaryOp<"xor", Graph_IntOrBoolTensor, "bitwise/logical xor", [Commutative]>;
def Graph_ShiftLeftOp : Graph_BinaryOp<"shift_left", Graph_IntOrBoolTensor,
  "`lhs << rhs` (ONNX BitShift LEFT); shifts of the width or more give 0">;
def Graph_ShiftRightOp : Graph_BinaryOp<"shift_right", Graph_IntOrBoolTensor,
  "`lhs >> rhs`, logical for unsigned and arithmetic for signed types; "
  "shifts of the width or more give 0 (or -1 for negative signed values)">;

class Graph_CompareOp<string mnemonic, string doc, list<Trait> traits = []>
    : Graph_BroadcastOp<mnemonic, traits> {
  let summary = "Elementwise comparison `" # doc # "` with NumPy broadcasting";
  let description = "Yields an `i1` tensor of the broadcast shape.";
  let arguments = (ins Graph_Tensor:$lhs, Graph_Tensor:$rhs);
  let results = (outs Graph_BoolTensor:$result);
}
def Graph_EqualOp : Graph_CompareOp<"equal", "lhs == rhs", [Commutative]>;
def Graph_LessOp : Graph_CompareOp<"less", "lhs < rhs">;
def Graph_LessEqualOp : Graph_CompareOp<"less_equal", "lhs <= rhs">;
def Graph_GreaterOp : Graph_CompareOp<"greater", "lhs > rhs">;
def Graph_GreaterEqualOp : Graph_CompareOp<"greater_equal", "lhs >= rhs">;

def Graph_SelectOp : Graph_BroadcastOp<"select"> {
  let summary = "`cond ? on_true : on_false` with NumPy broadcasting of all three";
  let arguments = (ins Graph_BoolTensor:$cond, Graph_Tensor:$on_true,
                   Graph_Tensor:$on_false);
  let results = (outs Graph_Tensor:$result);
}

def Graph_CastOp : Graph_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "Convert the element type";
  let description = [{
    Float to integer truncates toward zero; to `i1` tests for non-zero;
    float narrowing rounds to nearest even (stochastic rounding is a separate,
    later lowering of precision casts).
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and neural-network operators
//===----------------------------------------------------------------------===//

def Graph_MatmulOp : Graph_Op<"matmul", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "NumPy matmul: batched matrix product with broadcast batch dims";
  let description = [{
    Rank-1 operands are promoted (a leading or trailing 1 is inserted and then
    removed from the result) as in `numpy.matmul`; leading batch dimensions
    broadcast. Gemm's transposes, `alpha` and `beta` are separate ops.
  }];
  let arguments = (ins Graph_NumericTensor:$lhs, Graph_NumericTensor:$rhs);
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_ConvOp : Graph_Op<"conv", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "N-d grouped, strided, dilated convolution (cross-correlation)";
  let description = [{
    `input` is N x C x D1 ... Dn, `weight` is M x C/groups x K1 ... Kn, the
    optional `bias` has M elements. `pads` holds the n leading pads followed
    by the n trailing pads. Output size per spatial dim:
    `floor((D + pad_lo + pad_hi - dilation * (K - 1) - 1) / stride) + 1`.
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                   Optional<Graph_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

class Graph_PoolOp<string mnemonic, string doc> : Graph_Op<mnemonic,
    [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = doc;
  let description = [{
    Pools over the spatial dims of an N x C x D1 ... Dn input. `pads` holds
    the leading then trailing pads. With `ceil_mode` the output size rounds
    up, but a window never starts inside the trailing padding.
  }];
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Graph_MaxPoolOp : Graph_PoolOp<"max_pool", "Max pooling"> {
  let arguments = (ins Graph_NumericTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   BoolAttr:$ceil_mode);
}

def Graph_AvgPoolOp : Graph_PoolOp<"avg_pool",
    "Average pooling; `count_include_pad` divides by the full window size"> {
  let arguments = (ins Graph_FloatTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   BoolAttr:$ceil_mode, BoolAttr:$count_include_pad);
}

class Graph_ReduceOp<string mnemonic, string doc, Type tensorType>
    : Graph_Op<mnemonic, [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = doc # " over `axes`";
  let description = [{
    `axes` is sorted, unique and non-negative; empty `axes` is the identity.
    With `keepdims` the reduced dimensions stay with size 1.
  }];
  let arguments = (ins tensorType:$input, DenseI64ArrayAttr:$axes,
                   BoolAttr:$keepdims);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}
def Graph_ReduceSumOp : Graph_ReduceOp<"reduce_sum", "Sum", Graph_NumericTensor>;
def Graph_ReduceMeanOp : Graph_ReduceOp<"reduce_mean", "Mean", Graph_FloatTensor>;
def Graph_ReduceMaxOp : Graph_ReduceOp<"reduce_max", "Maximum", Graph_NumericTensor>;
def Graph_ReduceMinOp : Graph_ReduceOp<"reduce_min", "Minimum", Graph_NumericTensor>;
def Graph_ReduceProdOp : Graph_ReduceOp<"reduce_prod", "Product", Graph_NumericTensor>;

class Graph_ArgReduceOp<string mnemonic, string doc>
    : Graph_Op<mnemonic, [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Index of the " # doc # " along `axis` (i64)";
  let description = [{
    Ties resolve to the first index, or the last with `select_last_index`.
  }];
  let arguments = (ins Graph_NumericTensor:$input, I64Attr:$axis,
                   BoolAttr:$keepdims, BoolAttr:$select_last_index);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}
def Graph_ArgMaxOp : Graph_ArgReduceOp<"argmax", "maximum">;
def Graph_ArgMinOp : Graph_ArgReduceOp<"argmin", "minimum">;

class Graph_SoftmaxBase<string mnemonic, string doc>
    : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = doc # " along `axis`";
  let arguments = (ins Graph_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Graph_SoftmaxOp : Graph_SoftmaxBase<"softmax", "Softmax">;
def Graph_LogSoftmaxOp : Graph_SoftmaxBase<"log_softmax", "Log of softmax">;

def Graph_BatchNormOp : Graph_Op<"batch_norm", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Batch normalisation with running statistics (inference form)";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, with the per-channel
    vectors broadcast along dimension 1 of an N x C x ... input.
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                   Graph_FloatTensor:$bias, Graph_FloatTensor:$mean,
                   Graph_FloatTensor:$variance, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Layer normalisation over dimensions `axis` .. rank-1";
  let description = [{
    Normalises over the trailing dims from `axis`, then multiplies by `scale`
    and adds `bias`, both shaped like those trailing dims (or broadcastable to
    them).
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                   Graph_FloatTensor:$bias, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_GroupNormOp : Graph_Op<"group_norm", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Group normalisation (instance norm when groups == channels)";
  let description = [{
    Splits the C channels of an N x C x ... input into `num_groups` groups,
    normalises each group over its channels and spatial dims, then applies a
    per-channel `scale` and `bias` (C elements each).
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                   Graph_FloatTensor:$bias, I64Attr:$num_groups,
                   F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure]> {
  let summary = "Reinterpret the elements (row-major) under another shape";
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Permute dimensions: result dim i is input dim `perm[i]`";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Graph_ExpandOp : Graph_Op<"expand", [Pure]> {
  let summary = "Broadcast to the result shape (NumPy rules)";
  let description = [{
    The explicit form of broadcasting: the input's shape, aligned at the
    trailing dimension, must broadcast to the result's shape.
  }];
  let arguments = (ins Graph_Tensor:$input);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Join tensors along `axis`";
  let arguments = (ins Variadic<Graph_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Strided slice with one (start, limit, stride) per dimension";
  let description = [{
    Result dim d holds elements `start[d] + i * stride[d]` for i from 0 while
    the index is before `limit[d]` (after it, for a negative stride). Starts
    lie in [0, size); limits in [-1, size]; strides are non-zero.
  }];
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Graph_PadOp : Graph_Op<"pad", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Pad each dimension with constant, reflected or edge values";
  let arguments = (ins Graph_Tensor:$input, DenseI64ArrayAttr:$pads_low,
                   DenseI64ArrayAttr:$pads_high, Graph_PadModeAttr:$mode,
                   F64Attr:$value);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Graph_GatherOp : Graph_Op<"gather", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Take slices of `input` along `axis` at `indices`";
  let description = [{
    Result shape: input.shape[:axis] + indices.shape + input.shape[axis+1:].
    Negative indices count from the end, as in ONNX Gather.
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Graph_ScatterAddOp : Graph_Op<"scatter_add", [Pure]> {
  let summary = "Add slices of `updates` into a zero tensor at `indices` along `axis`";
  let description = [{
    The adjoint of `graph.gather` (an embedding's gradient; PopLibs'
    multiUpdateAdd): with `updates` of shape result.shape[:axis] +
    indices.shape + result.shape[axis+1:],
    `result[p..., v, q...]` is the sum of `updates[p..., i..., q...]` over
    every index position `i...` whose index is `v`. Negative indices count
    from the end, as in gather; an index out of range adds nothing.

    ```mlir
    %grad = graph.scatter_add %g, %ids {axis = 0 : i64}
        : (tensor<128x768xf32>, tensor<128xi64>) -> tensor<30522x768xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$updates, Graph_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_GatherElementsOp : Graph_Op<"gather_elements",
    [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Pick one element of `input` per index, along `axis`";
  let description = [{
    `indices` has the rank of `input`; the result has the shape of
    `indices`, and result[i...] = input[i... with dim `axis` replaced by
    indices[i...]]. Negative indices count from the end (ONNX
    GatherElements, torch.gather).
  }];
  let arguments = (ins Graph_Tensor:$input, Graph_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_RandomUniformOp : Graph_Op<"random_uniform", [Pure]> {
  let summary = "Uniform random numbers from a counter-based generator";
  let description = [{
    `result[i] = low + (high - low) * u[i]`, where `u[i]` in [0, 1) is 24
    bits of splitmix64(key + i * 0x9E3779B97F4A7C15), `i` the row-major
    index of the element and `key` a splitmix64 mix of `seed`, `counter`
    and `stream`. Counter-based, like Philox in PyTorch's and JAX's
    generators: the numbers depend on (seed, counter, stream, element) only,
    never on how tile mapping splits the tensor, so every tile, replica and
    the host reference draw the same number for an element, different
    elements draw independent ones, and a step's `counter` (a state the
    program increments) gives every step fresh numbers. `stream` tells
    apart random ops of one program.

    `seed` and `counter` are 0-d i64 tensors.
  }];
  let arguments = (ins Graph_IndexTensor:$seed, Graph_IndexTensor:$counter,
                   I64Attr:$stream, F64Attr:$low, F64Attr:$high);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$seed `,` $counter attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_StochasticRoundOp : Graph_Op<"stochastic_round", [Pure]> {
  let summary = "Round f32 to f16 stochastically (unbiased)";
  let description = [{
    Each element rounds to one of its two neighbouring f16 values with
    probability proportional to closeness, so that the expectation is the
    input (IPU_MODEL.md, "Stochastic rounding"): random bits are added
    below the f16 last place and the rest truncated, in bit operations.
    Values f16 holds exactly are unchanged; NaN stays NaN; magnitudes above
    f16's largest finite value round to nearest (overflow as
    round-to-nearest); f16 subnormals round stochastically too. The random
    bits come from the counter-based generator of `graph.random_uniform`
    (seed, counter, stream, element index): independent of the tile
    mapping, so the IPU model and the host reference round alike.
    Training's weight updates in fp16 use it (`--stochastic-rounding`):
    many updates smaller than half an f16 step add up in expectation instead
    of vanishing.
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_IndexTensor:$seed,
                   Graph_IndexTensor:$counter, I64Attr:$stream);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $seed `,` $counter attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_CrossReplicaSumOp : Graph_Op<"cross_replica_sum", [Pure]> {
  let summary = "Sum tensors over the program's replicas";
  let description = [{
    Result `i` is the sum of `inputs[i]` over every replica, the same in
    each: `graph-replicate` reduces a replicated training step's gradients
    with it, one op per placement (stage and IPU) for all the gradients
    there, so that each becomes one merged all-reduce. Lowers to
    `ipu.cross_replica_sum`.
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs);
  let results = (outs Variadic<Graph_FloatTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($results)";
  let hasVerifier = 1;
}

def Graph_ResizeOp : Graph_Op<"resize", [Pure]> {
  let summary = "Resample to the result shape by interpolation";
  let description = [{
    `scales[d]` is the scale used to map an output coordinate back to the
    input (it can differ from result/input size when the size was rounded).
  }];
  let arguments = (ins Graph_NumericTensor:$input, DenseF64ArrayAttr:$scales,
                   Graph_ResizeModeAttr:$mode,
                   Graph_CoordinateTransformAttr:$coordinate_transform,
                   Graph_NearestModeAttr:$nearest_mode, F64Attr:$cubic_coeff_a,
                   BoolAttr:$exclude_outside);
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // TESSERA_DIALECT_GRAPH_IR_GRAPHOPS_TD
