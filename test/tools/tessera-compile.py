# The compile CLI: phases, round trips, MLIR's standard flags.
# RUN: %python %s %t
# Phases: input keeps the shape arithmetic, graph folds it.
# RUN: tessera-compile %t/model.onnx --compile-to=input | FileCheck %s --check-prefix=INPUT
# RUN: tessera-compile %t/model.onnx --compile-to=graph | FileCheck %s --check-prefix=GRAPH
# The default phase is executable: a .tess next to the model, or at -o.
# RUN: cd %t && tessera-compile model.onnx && test -s %t/model.tess
# RUN: tessera-compile %t/model.onnx -o /dev/null
# RUN: test -c /dev/null
# RUN: tessera-compile %t/model.onnx --compile-to=linalg | FileCheck %s --check-prefix=LINALG
# RUN: tessera-compile %t/model.onnx --compile-to=ipu | FileCheck %s --check-prefix=IPUPHASE
# RUN: not tessera-compile %t/model.onnx --compile-to=training 2>&1 | FileCheck %s --check-prefix=TRAINING
# RUN: not tessera-compile %t/model.onnx --compile-to=banana 2>&1 | FileCheck %s --check-prefix=UNKNOWN
# Targets: ipu1, ipu2 (default) and bow; --num-ipus; --tiles-per-ipu.
# RUN: tessera-compile %t/model.onnx --target=bow --num-ipus=2 --tiles-per-ipu=64 -o %t/bow.tess
# RUN: tessera-run %t/bow.tess --reference --input %t/x.npy | FileCheck %s --check-prefix=BOW
# RUN: not tessera-compile %t/model.onnx --target=ipu9 2>&1 | FileCheck %s --check-prefix=BADTARGET
# RUN: not tessera-compile %t/model.onnx --tiles-per-ipu=2000 2>&1 | FileCheck %s --check-prefix=BADTILES
# RUN: not tessera-compile %t/model.onnx --num-ipus=0 2>&1 | FileCheck %s --check-prefix=BADIPUS
# RUN: not tessera-compile %t/model.onnx --host-cpu=pentium9 -o %t/bad.tess 2>&1 | FileCheck %s --check-prefix=BADCPU
# RUN: not test -e %t/bad.tess
# An output that cannot be written is said before the compile's work.
# RUN: not tessera-compile %t/model.onnx -o %t/no/such/dir/x.tess 2>&1 | FileCheck %s --check-prefix=NODIR
# RUN: tessera-compile %t/model.onnx --host-cpu=generic -o %t/generic.tess
# RUN: tessera-run %t/generic.tess --input %t/x.npy | FileCheck %s --check-prefix=GENERIC
# Output re-enters, as text and as bytecode, and reaches the same IR.
# RUN: tessera-compile %t/model.onnx --compile-to=input -o %t/input.mlir
# RUN: tessera-compile %t/input.mlir --compile-to=graph | FileCheck %s --check-prefix=GRAPH
# RUN: tessera-compile %t/model.onnx --compile-to=graph --emit-bytecode -o %t/graph.mlirbc
# RUN: tessera-opt %t/graph.mlirbc | FileCheck %s --check-prefix=GRAPH
# RUN: not tessera-compile %t/input.mlir --input-shape x=1 2>&1 | FileCheck %s --check-prefix=MLIRSHAPE
# MLIR's standard flags.
# RUN: tessera-compile %t/model.onnx --compile-to=graph --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT
# RUN: tessera-compile %t/model.onnx --compile-to=graph --mlir-timing -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIMING
# An executable's passes: the host reference code is prepared, not lowered
# (a reference run lowers it), the tiles planned, the vertex kernels lowered.
# --verify-each (the IR verified after every pass, not only after each
# pipeline) makes the same executable.
# RUN: tessera-compile %t/model.onnx --mlir-timing -o %t/timed.tess 2>&1 | FileCheck %s --check-prefix=EXETIMING
# RUN: tessera-compile %t/model.onnx --verify-each -o %t/verified.tess
# RUN: cmp %t/timed.tess %t/verified.tess
# RUN: tessera-compile %t/model.onnx --compile-to=graph --summary --no-output | FileCheck %s --check-prefix=SUMMARY
# RUN: tessera-compile %t/model.onnx --compile-to=graph --progress -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROGRESS
# An executable's --summary adds its estimate, the cycles the IPU model then
# counts; the executable carries the totals.
# RUN: tessera-compile %t/model.onnx --summary -o %t/estimate.tess > %t/estimate.txt
# RUN: tessera-run %t/estimate.tess --input %t/x.npy >> %t/estimate.txt
# RUN: FileCheck %s --check-prefix=ESTIMATE < %t/estimate.txt
# --explain-plans: a remark per op with its plan and estimated cycles.
# RUN: tessera-compile %t/model.onnx --explain-plans -o %t/explain.tess 2>&1 | FileCheck %s --check-prefix=EXPLAIN
# RUN: %python -c "import json,struct,sys; b=open(sys.argv[1],'rb').read(); print(b.decode('latin-1'))" %t/estimate.tess | FileCheck %s --check-prefix=CARRIED
# RUN: tessera-compile %t/model.onnx --compile-to=graph --mlir-pass-pipeline-crash-reproducer=%t/repro.mlir -o /dev/null
# External data next to the model is found.
# RUN: tessera-compile %t/ext/external.onnx --compile-to=graph | FileCheck %s --check-prefix=EXT
# RUN: tessera-compile --list-onnx-ops | FileCheck %s --check-prefix=OPS
import os
import sys

import numpy as np
import onnx
from onnx_gen import T, init, node, save, vi

out = sys.argv[1]

# ESTIMATE: wrote {{.*}}estimate.tess
# ESTIMATE-NEXT: estimated on ipu2: 1 IPU x 1472 tiles
# ESTIMATE-NEXT: one iteration (batch 2): [[CYCLES:[0-9,]+]] cycles, {{.*}} samples/s
# ESTIMATE-NEXT: compute {{[0-9,]+}} ({{.*}}%), exchange {{[0-9,]+}} ({{.*}}%), sync {{[0-9,]+}} ({{.*}}%)
# ESTIMATE-NEXT: 120 multiply-accumulates: {{.*}}% of the fp32 peak
# ESTIMATE-NEXT: on the device (without host streams): {{[0-9,]+}} cycles, {{.*}}% of the fp32 peak
# ESTIMATE-NEXT: costliest steps (3 of 3):
# ESTIMATE-NEXT: cycles compute exchange sync tiles peak step op
# ESTIMATE-NEXT: cs0 m
# ESTIMATE: tile memory: peak {{[0-9,]+}} B on tile {{[0-9]+}} ({{.*}}% of 638,976), mean {{[0-9,]+}} B over 1472 tiles: peak/mean {{[0-9.]+}}
# ESTIMATE: estimated on ipu2: [[CYCLES]] cycles, {{.*}} ms per iteration
# EXPLAIN: remark: m: {{(not split|split into [0-9]+ partial results)}} along reduction loop 2 (12 iterations)
# EXPLAIN: remark: m: #ipu.plan<mapping = #ipu.mapping<{{.*}}>{{.*}}>: {{[0-9]+}} estimated cycles on its slowest vertex
# CARRIED: "estimate":{"compute_cycles":{{[0-9]+}},"cycles":{{[0-9]+}},"exchange_cycles":{{[0-9]+}},"sync_cycles":{{[0-9]+}}}

# INPUT: graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<2x12xf32>
# INPUT: graph.matmul
# GRAPH: ml_program.global private @w
# GRAPH: func.func @main(%arg0: tensor<2x3x4xf32> {graph.name = "x"}) -> (tensor<2x5xf32> {graph.name = "y"})
# GRAPH: graph.reshape %arg0 : tensor<2x3x4xf32> -> tensor<2x12xf32>
# GRAPH: graph.matmul %{{.*}}, %{{.*}} : (tensor<2x12xf32>, tensor<12x5xf32>) -> tensor<2x5xf32>
# GRAPH-NOT: graph.add
save("model", [
    node("Flatten", ["x"], ["f"]),
    node("MatMul", ["f", "w"], ["m"]),
    node("Add", ["m", "zero"], ["y"]),
], [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 5])],
    [init("w", np.ones((12, 5), np.float32)), init("zero", np.float32(0))], outdir=out)
np.save(os.path.join(out, "x.npy"), np.ones((2, 3, 4), np.float32))

# LINALG: ml_program.global private @w
# LINALG: tensor.reshape %arg0
# LINALG: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
# LINALG-NOT: graph.
# IPUPHASE: ipu.target = #ipu.target<"ipu2"
# IPUPHASE: ipu.compute_set
# IPUPHASE: func.func @vertex_
# TRAINING: error: --compile-to=training builds a training step: add --train (and --loss, --optimizer)
# UNKNOWN: error: unknown phase 'banana' for --compile-to
# BOW: compiled for bow: 2 IPUs x 64 tiles x 624 KiB, 1.85 GHz
# BADTARGET: error: unknown target 'ipu9'; targets are ipu1, ipu2, bow
# BADTILES: error: --tiles-per-ipu must be between 1 and 1472 for ipu2, got 2000
# BADIPUS: error: --num-ipus must be between 1 and 64, got 0
# BADCPU: error: --host-cpu=pentium9 is not a CPU LLVM knows for {{.*}}: use native (this machine), generic (any {{.*}} host) or an LLVM CPU name such as x86-64-v3
# BADCPU-NOT: recognized processor
# NODIR: error: cannot create a file next to '{{.*}}/no/such/dir/x.tess': No such file or directory
# GENERIC: y: 2x5xf32 {{.*}}[12, 12, 12, 12, 12, ...]
# MLIRSHAPE: error: --input-shape and --input-type apply to ONNX and TorchScript models; an MLIR input already states its types
# PRINT: IR Dump After GraphInferShapes
# PRINT: IR Dump After Canonicalizer
# TIMING: Execution time report
# TIMING: import
# TIMING: GraphInferShapes
# EXETIMING: pipeline from codegen-host-one-replica
# EXETIMING-NEXT: HostOneReplica
# EXETIMING-NEXT: ExternalizeWeights
# EXETIMING-NEXT: pipeline from ipu-fuse-elementwise
# EXETIMING: IPUPlanTiles
# EXETIMING: pipeline from one-shot-bufferize
# EXETIMING-NOT: translate the host reference
# EXETIMING: vertex kernels: translate, O2 and instruction selection
# SUMMARY: inputs:  x: 2x3x4xf32
# SUMMARY: outputs: y: 2x5xf32
# SUMMARY: ops:     2 (matmul 1, reshape 1)
# SUMMARY: params:  60 (60) in 1 globals, 0.0 MiB
# SUMMARY: FLOPs:   240 per run (conv 0, matmul 240, other 0)
# PROGRESS: [graph] graph-infer-shapes (1)

# EXT: ml_program.global private @w
# EXT: graph.matmul
ext = os.path.join(out, "ext")
os.makedirs(ext, exist_ok=True)
m = onnx.helper.make_model(onnx.helper.make_graph(
    [node("MatMul", ["x", "w"], ["y"])], "g", [vi("x", T.FLOAT, [2, 64])],
    [vi("y", T.FLOAT, [2, 64])], [init("w", np.ones((64, 64), np.float32))]),
    opset_imports=[onnx.helper.make_opsetid("", 17)])
onnx.save(m, os.path.join(ext, "external.onnx"), save_as_external_data=True,
          location="external.onnx.data", size_threshold=0)

# OPS: Conv
# OPS: Einsum
# OPS: LayerNormalization
