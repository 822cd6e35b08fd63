"""Runs a model through Tessera's graph -> linalg lowering on the host.

A test harness, not the runtime: the model is compiled to the graph phase by
tessera-compile, lowered by `tessera-opt --convert-graph-to-linalg`, then
through MLIR's upstream CPU pipeline (bufferize, loops, LLVM) and executed by
mlir-runner, with the inputs embedded as constants and the outputs printed.
It checks the numerics of the importer and of the linalg lowering against
PyTorch before the IPU backend exists.
"""
import os
import re
import subprocess

import numpy as np

from conftest import tool

LLVM_BIN = "/usr/lib/llvm-22/bin"
LLVM_LIB = "/usr/lib/llvm-22/lib"
LOWER_TO_LLVM = [
    "--one-shot-bufferize=bufferize-function-boundaries",
    "--convert-linalg-to-loops", "--expand-strided-metadata", "--lower-affine",
    "--convert-scf-to-cf", "--convert-math-to-llvm", "--convert-math-to-libm",
    "--finalize-memref-to-llvm", "--convert-arith-to-llvm",
    "--convert-func-to-llvm", "--convert-cf-to-llvm", "--convert-index-to-llvm",
    "--reconcile-unrealized-casts",
]
MLIR_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64",
              np.dtype(np.int32): "i32", np.dtype(np.bool_): "i1"}
PRINTERS = {"f32": "printMemrefF32", "i64": "printMemrefI64", "i32": "printMemrefI32"}


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:3]))} failed:\n{r.stderr[-4000:]}")
    return r.stdout


def _tensor_type(shape, elem):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def _constant(array):
    elem = MLIR_TYPES[array.dtype]
    t = _tensor_type(array.shape, elem)
    if array.dtype == np.bool_:
        values = ", ".join("true" if v else "false" for v in array.flatten())
        return f"arith.constant dense<[{values}]> : tensor<{array.size}xi1>", array.size
    # Hex keeps every bit of the test inputs.
    return f'arith.constant dense<"0x{array.tobytes().hex().upper()}"> : {t}', None


def _inline_globals(ir):
    """ml_program globals -> arith.constant dense_resource (same payload)."""
    keys = dict(re.findall(
        r'ml_program\.global private @("?[^ (]+"?)\(dense_resource<("?[^>]+"?)>', ir))
    ir = re.sub(r"^\s*ml_program\.global private .*\n", "", ir, flags=re.M)

    def load(m):
        return f"{m.group(1)} = arith.constant dense_resource<{keys[m.group(2)]}> : {m.group(3)}"
    return re.sub(r"(%\S+) = ml_program\.global_load_const @(\S+) : (tensor<[^>]+>)", load, ir)


def _parse_outputs(text, count):
    blocks = text.split("Unranked Memref")[1:]
    assert len(blocks) == count, text[-2000:]
    arrays = []
    for b in blocks:
        sizes = [int(s) for s in re.search(r"sizes = \[([^\]]*)\]", b).group(1).split(",") if s.strip()]
        data = b.split("data =", 1)[1]
        values = re.findall(r"-?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?)", data)
        arrays.append(np.array([float(v) for v in values]).reshape(sizes))
    return arrays


def run_on_host(onnx_path, inputs, workdir, extra_compile_args=()):
    """Returns the model's outputs for `inputs` (a list of numpy arrays)."""
    graph = _run([tool("tessera-compile"), str(onnx_path), "--compile-to=graph",
                  *extra_compile_args])
    graph = _inline_globals(graph)
    sig = re.search(r"func\.func @main\((.*?)\) -> \((.*?)\) \{", graph)
    assert sig, graph[:2000]
    result_types = re.findall(r"(tensor<[^>]+>)", sig.group(2))
    arg_types = re.findall(r"(tensor<[^>]+>)", sig.group(1))
    lines = ["func.func @entry() {"]
    args = []
    for i, (a, t) in enumerate(zip(inputs, arg_types)):
        const, bool_size = _constant(np.ascontiguousarray(a))
        if bool_size is not None:
            lines.append(f"  %flat{i} = {const}")
            lines.append(f'  %shape{i} = arith.constant dense<[{", ".join(map(str, a.shape))}]> : tensor<{a.ndim}xindex>')
            lines.append(f"  %in{i} = tensor.reshape %flat{i}(%shape{i}) : (tensor<{bool_size}xi1>, tensor<{a.ndim}xindex>) -> {t}")
        else:
            lines.append(f"  %in{i} = {const}")
        args.append(f"%in{i}")
    lines.append(f"  %r:{len(result_types)} = call @main({', '.join(args)}) : "
                 f"({', '.join(arg_types)}) -> ({', '.join(result_types)})")
    decls = set()
    for i, t in enumerate(result_types):
        elem = re.search(r"x?([a-z]+\d+)>$", t).group(1)
        value = f"%r#{i}"
        if elem == "i1":  # printed as i64
            wide = t.replace("i1>", "i64>")
            lines.append(f"  %w{i} = arith.extui {value} : {t} to {wide}")
            value, t, elem = f"%w{i}", wide, "i64"
        lines.append(f"  %u{i} = tensor.cast {value} : {t} to tensor<*x{elem}>")
        lines.append(f"  call @{PRINTERS[elem]}(%u{i}) : (tensor<*x{elem}>) -> ()")
        decls.add(f"func.func private @{PRINTERS[elem]}(tensor<*x{elem}>) "
                  "attributes { llvm.emit_c_interface }")
    lines.append("  return\n}")
    lines.extend(sorted(decls))
    # The entry function goes inside the module, before its closing brace.
    body_end = graph.rfind("}\n", 0, graph.find("{-#") if "{-#" in graph else len(graph))
    module = graph[:body_end] + "\n".join(lines) + "\n" + graph[body_end:]
    src = os.path.join(workdir, "host.mlir")
    with open(src, "w") as f:
        f.write(module)
    linalg = _run([tool("tessera-opt"), src, "--convert-graph-to-linalg"])
    lowered = _run([f"{LLVM_BIN}/mlir-opt", "-", *LOWER_TO_LLVM], input=linalg)
    out = _run([f"{LLVM_BIN}/mlir-runner", "-", "-e", "entry", "--entry-point-result=void",
                f"-shared-libs={LLVM_LIB}/libmlir_c_runner_utils.so,{LLVM_LIB}/libmlir_runner_utils.so"],
               input=lowered)
    return _parse_outputs(out, len(result_types))
