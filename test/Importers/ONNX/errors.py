# Bad input is a clear error and a non-zero exit, never a crash, and no
# partial output file is left behind.
# RUN: %python %s %t
# RUN: not tessera-compile %t/truncated.onnx -o %t/out.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
# RUN: not test -e %t/out.mlir
# RUN: not tessera-compile %t/text.onnx 2>&1 | FileCheck %s --check-prefix=TEXT
# RUN: not tessera-compile %t/opset20.onnx 2>&1 | FileCheck %s --check-prefix=OPSET
# An older opset is read as opset 6 when its operators are defined the same
# way (Softsign has not changed since opset 1); else the changed ones are named.
# RUN: tessera-compile %t/opset1.onnx --compile-to=graph | FileCheck %s --check-prefix=OPSET1
# RUN: not tessera-compile %t/opset1relu.onnx 2>&1 | FileCheck %s --check-prefix=OPSET1RELU
# RUN: not tessera-compile %t/unsupported.onnx 2>&1 | FileCheck %s --check-prefix=UNSUP
# RUN: not tessera-compile %t/missing.onnx 2>&1 | FileCheck %s --check-prefix=MISSING
# RUN: not tessera-compile %t/dynamic.onnx 2>&1 | FileCheck %s --check-prefix=DYN
# RUN: not tessera-compile %t/dynamic.onnx --input-shape x=2x3x4 2>&1 | FileCheck %s --check-prefix=RANK
# RUN: not tessera-compile %t/dynamic.onnx --input-shape y=2x3 2>&1 | FileCheck %s --check-prefix=NAME
# RUN: not tessera-compile %t/dynamic.onnx --input-shape x=2xq 2>&1 | FileCheck %s --check-prefix=SYNTAX
# RUN: tessera-compile %t/dynamic.onnx --compile-to=graph --input-shape x=2x3 | FileCheck %s --check-prefix=FIXED
# RUN: not tessera-compile %t/dynamic.onnx --input-shape x=2x3 --input-type x=i64 2>&1 | FileCheck %s --check-prefix=TYPE
# RUN: not tessera-compile %t/dynamic.onnx --input-shape x=2x3 --input-type x=int 2>&1 | FileCheck %s --check-prefix=TYPENAME
# RUN: not tessera-compile %t/badshape.onnx 2>&1 | FileCheck %s --check-prefix=SHAPE
# RUN: not tessera-compile %t/badreshape.onnx 2>&1 | FileCheck %s --check-prefix=RESHAPE
# RUN: not tessera-compile %t/nonconst.onnx 2>&1 | FileCheck %s --check-prefix=NONCONST
# RUN: not tessera-compile %t/external.onnx 2>&1 | FileCheck %s --check-prefix=EXTERNAL
# RUN: not tessera-compile %t/no-such-file.onnx 2>&1 | FileCheck %s --check-prefix=NOFILE
# RUN: not tessera-compile %t/utf8.onnx -o %t/utf8.tess 2>&1 | FileCheck %s --check-prefix=UTF8
# RUN: not test -e %t/utf8.tess
# RUN: not tessera-compile %t/argmax-empty.onnx 2>&1 | FileCheck %s --check-prefix=ARGEMPTY
# RUN: not tessera-compile %t/huge.onnx 2>&1 | FileCheck %s --check-prefix=HUGE
# RUN: not tessera-compile %t/dynamic.onnx --input-shape x=99999999999x3 2>&1 | FileCheck %s --check-prefix=HUGESHAPE
# RUN: not tessera-compile %t/einsum-absent.onnx 2>&1 | FileCheck %s --check-prefix=ABSENT
# RUN: not tessera-compile %t/scan-no-body.onnx 2>&1 | FileCheck %s --check-prefix=NOBODY
# RUN: not tessera-compile %t/split-no-outputs.onnx 2>&1 | FileCheck %s --check-prefix=NOOUT
# RUN: not tessera-compile %t/short-raw-data.onnx 2>&1 | FileCheck %s --check-prefix=SHORTRAW
# RUN: not tessera-compile %t/short-typed-data.onnx 2>&1 | FileCheck %s --check-prefix=SHORTTYPED
# Found by the ONNX importer's fuzzer (test/fuzz/fuzz_onnx.cpp):
# RUN: not tessera-compile %t/ref-attr.onnx 2>&1 | FileCheck %s --check-prefix=REFATTR
# RUN: not tessera-compile %t/two-values.onnx 2>&1 | FileCheck %s --check-prefix=TWOVALUES
# RUN: tessera-compile %t/default-value.onnx --compile-to=graph | FileCheck %s --check-prefix=DEFAULTVALUE
# RUN: not tessera-compile %t/untyped-input.onnx 2>&1 | FileCheck %s --check-prefix=UNTYPED
# RUN: not tessera-compile %t/scan-in-loop.onnx 2>&1 | FileCheck %s --check-prefix=INNERSCAN
# RUN: not tessera-compile %t/dft-int8.onnx 2>&1 | FileCheck %s --check-prefix=DFTINT
# RUN: not tessera-compile %t/unranked.onnx 2>&1 | FileCheck %s --check-prefix=UNRANKED
# RUN: not tessera-compile %t/conv-scalars.onnx 2>&1 | FileCheck %s --check-prefix=CONVSCALAR
# RUN: not tessera-compile %t/trilu-huge.onnx 2>&1 | FileCheck %s --check-prefix=TRILU
# RUN: not tessera-compile %t/eyelike-huge.onnx 2>&1 | FileCheck %s --check-prefix=EYE
# RUN: not tessera-compile %t/concat-overflow.onnx 2>&1 | FileCheck %s --check-prefix=CONCAT
# RUN: not tessera-compile %t/convtranspose-huge.onnx 2>&1 | FileCheck %s --check-prefix=CONVT
# RUN: not tessera-compile %t/bytes-overflow.onnx 2>&1 | FileCheck %s --check-prefix=BYTES
# RUN: not tessera-compile %t/blocksize-huge.onnx 2>&1 | FileCheck %s --check-prefix=BLOCKSIZE
# RUN: not tessera-compile %t/rnn-long.onnx 2>&1 | FileCheck %s --check-prefix=LONGRNN
# RUN: not tessera-compile %t/domain-not-imported.onnx 2>&1 | FileCheck %s --check-prefix=DOMAIN
# RUN: not tessera-compile %t/adam-absent.onnx 2>&1 | FileCheck %s --check-prefix=ADAM
# RUN: not tessera-compile %t/lstm-hidden-huge.onnx 2>&1 | FileCheck %s --check-prefix=HIDDEN
# RUN: not tessera-compile %t/reshape-overflow.onnx 2>&1 | FileCheck %s --check-prefix=RESHAPEHUGE
import os
import numpy as np
import onnx
from onnx_gen import T, init, node, save, vi, helper, numpy_helper
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
relu = lambda opset=17: save("ok", [node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2, 3])],
                             [vi("y", T.FLOAT, [2, 3])], opset=opset)

# TRUNC: truncated.onnx: error: cannot parse the file as an ONNX model (it is truncated, damaged or not ONNX)
data = open(relu(), "rb").read()
open(os.path.join(out, "truncated.onnx"), "wb").write(data[: len(data) // 2])

# TEXT: text.onnx: error: {{.*}}not{{.*}}ONNX
open(os.path.join(out, "text.onnx"), "w").write("this is not a model\n" * 10)

# OPSET: error: the model uses ONNX opset 20; Tessera imports opsets 6 to 17
save("opset20", [node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
     [vi("y", T.FLOAT, [2])], opset=20, check=False)

# OPSET1: graph.onnx_opset = 6
# OPSET1: graph.abs
save("opset1", [node("Softsign", ["x"], ["y"])], [vi("x", T.FLOAT, [2])],
     [vi("y", T.FLOAT, [2])], opset=1, check=False)
# OPSET1RELU: error: the model uses ONNX opset 1, whose Relu differ from opset 6; Tessera imports opsets 6 to 17
save("opset1relu", [node("Relu", ["x"], ["y"]), node("Softsign", ["y"], ["z"])],
     [vi("x", T.FLOAT, [2])], [vi("z", T.FLOAT, [2])], opset=1, check=False)

# Every unsupported operator at once, with its nodes and the opset.
# UNSUP: error: 2 unsupported operators (opset 17):
# UNSUP-NEXT: NonZero in 1 node: 'nz'
# UNSUP-NEXT: com.example::Frobnicate in 2 nodes: 'f1', 'f2'
m = helper.make_model(helper.make_graph(
    [node("NonZero", ["x"], ["v"], name="nz"),
     helper.make_node("Frobnicate", ["v"], ["a"], name="f1", domain="com.example"),
     helper.make_node("Frobnicate", ["a"], ["y"], name="f2", domain="com.example")],
    "g", [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [2])]),
    opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
onnx.save(m, os.path.join(out, "unsupported.onnx"))

# MISSING: error: Relu node #0 ('y') reads 'w', which no graph input, initializer or earlier node defines (nodes must be in topological order)
save("missing", [node("Relu", ["w"], ["y"])], [vi("x", T.FLOAT, [2])],
     [vi("y", T.FLOAT, [2])], check=False)

# DYN: error: input 'x' has symbolic dims (dim 0 'batch'); give its shape with --input-shape x=Nx3
# RANK: error: --input-shape gives 3 dims for input 'x', but the model declares rank 2 (?x3)
# NAME: error: --input-shape names 'y', which is not a graph input; inputs are: 'x'
# SYNTAX: error: bad dimension 'q' in --input-shape x=2xq
# TYPE: error: --input-type says i64 for input 'x', but the model declares f32
# TYPENAME: error: unknown element type 'int' in --input-type x=int (one of f32, f16, bf16, f64, i64, i32, i16, i8, ui8, i1)
# FIXED: func.func @main(%arg0: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x3xf32> {graph.name = "y"})
save("dynamic", [node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, ["batch", 3])],
     [vi("y", T.FLOAT, ["batch", 3])])

# SHAPE: error: operand shapes do not broadcast: 2x3 vs 4
# SHAPE: note: while importing ONNX node 'bad_add' (Add, opset 17)
save("badshape", [node("Add", ["x", "b"], ["y"], name="bad_add")],
     [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])],
     [init("b", np.ones(4, np.float32))], check=False)

# RESHAPE: error: Reshape: cannot reshape 2x3 to a shape with known dims of product 4
save("badreshape", [node("Reshape", ["x", "s"], ["y"])],
     [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [4, -1])],
     [init("s", np.array([4, -1], np.int64))], check=False)

# NONCONST: error: Reshape: input 'shape' must be a constant
save("nonconst", [node("Reshape", ["x", "s"], ["y"])],
     [vi("x", T.FLOAT, [2, 3]), vi("s", T.INT64, [2])], [vi("y", T.FLOAT, [3, 2])])

# EXTERNAL: error: cannot read external data of tensor 'w' from '{{.*}}weights.bin'
w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
w.data_location = onnx.TensorProto.EXTERNAL
w.ClearField("raw_data")
for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "64")):
    e = w.external_data.add(); e.key = k; e.value = v
save("external", [node("MatMul", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2, 4])],
     [vi("y", T.FLOAT, [2, 4])], [w], check=False)

# NOFILE: error: cannot read '{{.*}}no-such-file.onnx': No such file or directory

# Names that are not UTF-8 (an assertion in the JSON writer once): refused
# before anything is built.
# UTF8: error: graph input #0 has a name that is not valid UTF-8; rename it in the model
m = onnx.load_from_string(open(relu(), "rb").read())
m.graph.input[0].name = "xQQ"
m.graph.node[0].input[0] = "xQQ"
raw = m.SerializeToString().replace(b"xQQ", b"x\xff\xfe")
open(os.path.join(out, "utf8.onnx"), "wb").write(raw)

# An argmax over an empty dimension (a crash in tile mapping once); empty
# tensors are otherwise legal.
# ARGEMPTY: error: reduces over dimension 1 of 3x0, which is empty: there is no index to return
save("argmax-empty", [node("ArgMax", ["x"], ["y"], axis=1)], [vi("x", T.FLOAT, [3, 0])],
     [vi("y", T.INT64, [3, 1])], check=False)

# Declared sizes are checked before anything is allocated for them (a
# 2^40-element Hardmax ran out of host memory once).
# HUGE: error: input 'x' declares 2x1099511627776, more elements than any IPU system holds (at most 2^36)
# HUGESHAPE: error: input 'x' declares 99999999999x3, more elements than any IPU system holds
save("huge", [node("Hardmax", ["x"], ["y"], axis=1)], [vi("x", T.FLOAT, [2, 1 << 40])],
     [vi("y", T.FLOAT, [2, 1 << 40])], check=False)

# The model's structure is checked against the operators' schemas before
# ONNX's shape inference or a converter reads it (each crashed once).
# ABSENT: error: Einsum node 'Einsum_0': input 1 ('Inputs') is required, but the model leaves it out (an empty name)
save("einsum-absent", [helper.make_node("Einsum", ["x", ""], ["y"], equation="ij,jk->ik")],
     [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])], check=False)
# NOBODY: error: Scan node 'y' lacks its required attribute 'body'
save("scan-no-body", [node("Scan", ["x"], ["y"])], [vi("x", T.FLOAT, [2, 3])],
     [vi("y", T.FLOAT, [2, 3])], check=False)
# NOOUT: error: Split node 'Split_0' has 0 outputs; opset 17 gives 1 to any number
save("split-no-outputs", [helper.make_node("Split", ["x"], [])], [vi("x", T.FLOAT, [2, 3])],
     [vi("y", T.FLOAT, [2, 3])], check=False)
# SHORTRAW: error: initializer 's' holds 8 bytes of raw data, but 2 elements of its type need 16
short = numpy_helper.from_array(np.array([3, 2], np.int64), "s")
short.raw_data = short.raw_data[:8]
save("short-raw-data", [node("Reshape", ["x", "s"], ["y"])], [vi("x", T.FLOAT, [2, 3])],
     [vi("y", T.FLOAT, [3, 2])], [short], check=False)
# SHORTTYPED: error: initializer 'w' holds 3 values, but its dims need 6
typed = helper.make_tensor("w", T.FLOAT, [3], [1.0, 2.0, 3.0])
typed.dims[:] = [2, 3]
save("short-typed-data", [node("Add", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2, 3])],
     [vi("y", T.FLOAT, [2, 3])], [typed], check=False)

# Found by the ONNX importer's fuzzer; each crashed ONNX's shape inference
# or a converter, or took minutes, before it was checked.
# REFATTR: error: Shape node 'y': attribute 'start' refers to a function's attribute ('s'), which only a function's body may
ref = helper.make_attribute("start", 0)
ref.ref_attr_name = "s"
shape_node = node("Shape", ["x"], ["y"])
shape_node.attribute.append(ref)
save("ref-attr", [shape_node], [vi("x", T.FLOAT, [2, 3])], [vi("y", T.INT64, [2])],
     check=False)
# TWOVALUES: error: Shape node 'y': attribute 'start' has 2 values; an attribute has one
two = helper.make_attribute("start", 0)
two.floats.append(1.0)
shape_node = node("Shape", ["x"], ["y"])
shape_node.attribute.append(two)
save("two-values", [shape_node], [vi("x", T.FLOAT, [2, 3])], [vi("y", T.INT64, [2])],
     check=False)
# An INT attribute left at its default (proto3 writers omit it) is 0,
# as onnx.checker reads it: Softmax over axis 0.
# DEFAULTVALUE: graph.softmax %{{.*}} {axis = 0 : i64}
zero = helper.make_attribute("axis", 1)
zero.ClearField("i")
softmax = node("Softmax", ["x"], ["y"])
softmax.attribute.append(zero)
save("default-value", [softmax], [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])],
     check=False)
# UNTYPED: error: graph input 'x' has no type; declare its element type and shape
untyped = save("untyped-input", [node("EyeLike", ["x"], ["y"])], [vi("x", T.FLOAT, [2, 2])],
               [vi("y", T.FLOAT, [2, 2])], check=False)
m = onnx.load(untyped)
m.graph.input[0].ClearField("type")
onnx.save(m, untyped)
# INNERSCAN: error: Scan node 's' lacks its required attribute 'body'
body = helper.make_graph([node("Scan", ["c"], ["s"]), node("Identity", ["c"], ["c_out"])],
                         "body", [vi("i", T.INT64, []), vi("c", T.BOOL, [])],
                         [vi("c_out", T.BOOL, [])])
save("scan-in-loop", [helper.make_node("Loop", ["n", "c0"], [], name="loop", body=body)],
     [vi("n", T.INT64, []), vi("c0", T.BOOL, [])], [], check=False)
# DFTINT: error: DFT: input 0 ('input') is tensor(int8); opset 17 takes tensor(float16), tensor(float), tensor(double), tensor(bfloat16)
save("dft-int8", [node("DFT", ["x"], ["y"])], [vi("x", T.INT8, [1, 4, 1])],
     [vi("y", T.FLOAT, [1, 4, 2])], check=False)
# UNRANKED: error: input 'i' has no shape
unranked = helper.make_tensor_value_info("i", T.INT64, None)
save("unranked", [node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2])],
     [vi("x", T.FLOAT, [1, 1, 2, 2]), unranked], [vi("y", T.FLOAT, [1, 1, 4, 4])], check=False)
# CONVSCALAR: error: Conv: input must be N x C x spatial..., got
save("conv-scalars", [node("Conv", ["x", "w"], ["y"])], [vi("x", T.FLOAT, []),
                                                         vi("w", T.FLOAT, [])],
     [vi("y", T.FLOAT, [])], check=False)
# TRILU: error: Trilu: the triangle's mask would be a constant of more than the 2^24 elements Tessera builds at compile time
save("trilu-huge", [node("Trilu", ["x"], ["y"])], [vi("x", T.FLOAT, [4, 2147483647])],
     [vi("y", T.FLOAT, [4, 2147483647])], check=False)
# EYE: error: EyeLike: the identity matrix would be a constant of more than the 2^24 elements
save("eyelike-huge", [node("EyeLike", ["x"], ["y"])], [vi("x", T.FLOAT, [65536, 65536])],
     [vi("y", T.FLOAT, [65536, 65536])], check=False)
# CONCAT: error: result of shape 2x68719476736 has more elements than any IPU system holds (at most 2^36)
save("concat-overflow", [node("Concat", ["x", "x"], ["y"], axis=0)],
     [vi("x", T.FLOAT, [1, 1 << 36])], [vi("y", T.FLOAT, [2, 1 << 36])], check=False)
# CONVT: error: ConvTranspose: window attribute value 9223372036854775806 is out of range (at most 2^24)
save("convtranspose-huge", [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, (1 << 63) - 2])],
     [vi("x", T.FLOAT, [1, 1, 2, 2]), vi("w", T.FLOAT, [1, 1, 2, 2])],
     [vi("y", T.FLOAT, [1, 1, 4, 4])], check=False)
# BYTES: error: initializer 'w' has dimensions whose size in bytes overflows
huge_raw = numpy_helper.from_array(np.zeros(2, np.float32), "w")
huge_raw.dims[:] = [(1 << 63) - 1]
save("bytes-overflow", [node("Identity", ["w"], ["y"])], [vi("x", T.FLOAT, [2])],
     [vi("y", T.FLOAT, [2])], [huge_raw], check=False)
# BLOCKSIZE: error: DepthToSpace: window attribute value 9223372036854775807 is out of range (at most 2^24)
save("blocksize-huge", [node("DepthToSpace", ["x"], ["y"], blocksize=(1 << 63) - 1)],
     [vi("x", T.FLOAT, [1, 4, 2, 2])], [vi("y", T.FLOAT, [1, 1, 4, 4])], check=False)
# LONGRNN: error: RNN: a sequence of 1000000 steps: Tessera unrolls recurrences, over at most 16384 steps
save("rnn-long", [node("RNN", ["x", "w", "r"], ["y"], hidden_size=2)],
     [vi("x", T.FLOAT, [1000000, 1, 2])], [vi("y", T.FLOAT, [1000000, 1, 1, 2])],
     [init("w", np.ones((1, 2, 2), np.float32)), init("r", np.ones((1, 2, 2), np.float32))],
     check=False)
# DOMAIN: error: Adam node 'x_new' is of domain 'ai.onnx.preview.training', which the model does not import (opset_import)
# ADAM: error: Adam node 'x_new': input 3 ('inputs') is required, but the model leaves it out (an empty name)
for name, imports in [("domain-not-imported", []),
                      ("adam-absent", [helper.make_opsetid("ai.onnx.preview.training", 1)])]:
    g = helper.make_graph(
        [helper.make_node("Adam", ["r", "t", "x", "", "v", "h"], ["x_new", "v_new", "h_new"],
                          name="x_new", domain="ai.onnx.preview.training")],
        "g", [vi(n, T.FLOAT, [2]) for n in ("x", "v", "h")] +
        [vi("r", T.FLOAT, []), vi("t", T.INT64, [])], [vi("x_new", T.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)] + imports)
    onnx.save(m, os.path.join(out, name + ".onnx"))
# HIDDEN: error: LSTM: hidden_size must be positive and at most 2^24, got 9223372036854775807
save("lstm-hidden-huge", [node("LSTM", ["x", "w", "r"], ["y"], hidden_size=(1 << 63) - 1)],
     [vi("x", T.FLOAT, [3, 1, 2])], [vi("y", T.FLOAT, [3, 1, 1, 2])],
     [init("w", np.ones((1, 8, 2), np.float32)), init("r", np.ones((1, 8, 2), np.float32))],
     check=False)
# RESHAPEHUGE: error: Reshape: shape 49149x1125899906842623 has more elements than any IPU system holds
save("reshape-overflow", [node("Reshape", ["x", "s"], ["y"])], [vi("x", T.FLOAT, [2, 3])],
     [vi("y", T.FLOAT, [2, 3])],
     [init("s", np.array([49149, 1125899906842623], np.int64))], check=False)
