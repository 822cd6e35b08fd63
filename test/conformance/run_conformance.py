#!/usr/bin/python3
"""ONNX backend conformance: Debian's libonnx-testdata through Tessera.

Every model under /usr/share/libonnx-testdata/data/{node,pytorch-converted,
pytorch-operator,simple} is compiled with tessera-compile, run on each of its
test data sets with tessera-run, and its outputs are compared with the
expected ones (rtol 1e-3, atol 1e-7 as the ONNX backend tests; exact for
integers and booleans). Each model is classified as

  pass          every output of every data set matches
  wrong         it ran, but an output differs (or has the wrong shape/type)
  compile-error tessera-compile refused it (the first error says why)
  run-error     tessera-run refused it
  crash         a tool died from a signal or timed out (never acceptable)

Prints counts per suite and overall, writes a JSON results file, and with
--expected FILE fails if a model listed there no longer passes (the list of
expected passes guards against regressions; --update-expected rewrites it).

Outputs come from the IPU model (the tile-mapped program, `tessera-run`'s
default); `--device reference` runs the executables' host reference code
instead, which isolates importer bugs from tile-mapping bugs.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def input_file(pb, declared, tmp):
    """The .pb to feed for an input. ONNX's test data stores bfloat16
    tensors as UINT16 (NumPy has no bfloat16): relabel those for a model
    input declared BFLOAT16, bits unchanged."""
    t = load_pb(pb)
    if declared == onnx.TensorProto.BFLOAT16 and t.data_type == onnx.TensorProto.UINT16:
        t.data_type = onnx.TensorProto.BFLOAT16
        path = os.path.join(tmp, "bf16_" + os.path.basename(pb))
        with open(path, "wb") as f:
            f.write(t.SerializeToString())
        return path
    return pb


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def first_error(text):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "error:" in line:
            message = re.sub(r"^.*?error: ", "", line).strip()
            # Lists (unsupported operators) continue on the next lines.
            if message.endswith(":") and i + 1 < len(lines):
                message += " " + lines[i + 1].strip()
            return message[:300]
    return text.strip().splitlines()[-1][:300] if text.strip() else "no message"


def run_tool(cmd, refusal):
    """Runs a Tessera tool: None on success, else (status, detail) where a
    clean refusal is `refusal` and a signal or time-out is a crash."""
    name = os.path.basename(cmd[0])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "crash", f"{name} timed out"
    if r.returncode < 0 or r.returncode > 1:
        return "crash", f"{name} exit {r.returncode}: {first_error(r.stderr)}"
    if r.returncode != 0:
        return refusal, first_error(r.stderr)
    return None


# Compile errors that ask for a value known at compile time (a shape, axes,
# sizes, a count): Tessera compiles static shapes.
NEEDS_CONSTANT = re.compile(r"must be (a )?constants?\b|must be a constant|constant scalar|"
                            r"constant float tensor|with computed \(non-constant\) inputs")


def compile_model(model_path, shapes, constants, tools, tess):
    cmd = [tools["compile"], model_path, "-o", tess]
    for s in shapes:
        cmd += ["--input-shape", s]
    for name, pb in constants.items():
        cmd += ["--constant-input", f"{name}={pb}"]
    return run_tool(cmd, "compile-error")


def check(case_dir, tools, tmp):
    """Classifies one model; returns (status, detail)."""
    model_path = os.path.join(case_dir, "model.onnx")
    try:
        model = onnx.load(model_path, load_external_data=False)
    except Exception:  # the importer will say it better; still classify
        model = None
    data_sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    if not data_sets:
        return "compile-error", "no test data"
    inputs = graph_inputs(model) if model else []
    names = [inp.name for inp in inputs]
    first = os.path.join(case_dir, data_sets[0])
    shapes = []
    for i, inp in enumerate(inputs):
        pb = os.path.join(first, f"input_{i}.pb")
        if os.path.exists(pb):
            dims = list(load_pb(pb).dims)
            shapes.append(f"{inp.name}=" + ("x".join(map(str, dims)) if dims else "scalar"))
    tess = os.path.join(tmp, "model.tess")

    def compile_with(constant, data_set):
        """Compiles with the inputs in `constant` bound to data_set's values."""
        return compile_model(
            model_path, [s for s in shapes if s.split("=")[0] not in constant],
            {n: os.path.join(data_set, f"input_{names.index(n)}.pb") for n in constant},
            tools, tess)

    failed = compile_with([], first)
    # Inputs the model uses as shapes, axes or sizes are bound to each data
    # set's values at compile time (tessera-compile --constant-input), one
    # compile per data set: what a user of a static-shape compiler does.
    constant = []
    while failed and failed[0] == "compile-error" and NEEDS_CONSTANT.search(failed[1]):
        # "input 'shape' must be a constant ...; it is the model's input 'x'"
        named = [n for n in re.findall(r"input '([^']*)'", failed[1])
                 if n in names and n not in constant]
        rest = [n for n in names[1:] if n not in constant]
        more = named[:1] or rest
        if not more:
            break
        constant += more
        failed = compile_with(constant, first)
    if failed:
        return failed
    for k, ds in enumerate(data_sets):
        d = os.path.join(case_dir, ds)
        if constant and k > 0:
            failed = compile_with(constant, d)
            if failed:
                return failed
        out = os.path.join(tmp, "out.npz")
        cmd = [tools["run"], tess, "--output", out]
        if tools["device"] == "reference":
            cmd.append("--reference")
        for i, inp in enumerate(inputs):
            if inp.name not in constant:
                pb = input_file(os.path.join(d, f"input_{i}.pb"),
                                inp.type.tensor_type.elem_type, tmp)
                cmd += ["--input", f"{inp.name}={pb}"]
        failed = run_tool(cmd, "run-error")
        if failed:
            return failed
        got = np.load(out)
        for i, o in enumerate(model.graph.output):
            pb = os.path.join(d, f"output_{i}.pb")
            if not os.path.exists(pb):
                continue
            expected = numpy_helper.to_array(load_pb(pb))
            if o.name not in got:
                return "wrong", f"output '{o.name}' missing"
            g = got[o.name]
            if g.dtype.kind == "V" and g.dtype.itemsize == 2:
                g = g.view(np.uint16)  # bfloat16 bits, as the test data stores them
            if g.shape != expected.shape:
                return "wrong", f"output '{o.name}' shape {g.shape} != {expected.shape}"
            if expected.dtype.kind in "biu":
                if not np.array_equal(g.astype(expected.dtype), expected):
                    return "wrong", f"output '{o.name}' differs"
            elif not np.allclose(g.astype(np.float64), expected.astype(np.float64),
                                 rtol=1e-3, atol=1e-7, equal_nan=True):
                err = np.nanmax(np.abs(g.astype(np.float64) - expected))
                return "wrong", f"output '{o.name}' max abs error {err:.3g}"
    if constant:
        return "pass", "with --constant-input " + ", ".join(constant)
    return "pass", ""


def run_case(args):
    suite, name, tools = args
    with tempfile.TemporaryDirectory(prefix="tessera-conf-") as tmp:
        try:
            status, detail = check(os.path.join(DATA, suite, name), tools, tmp)
        except Exception as e:  # a harness problem, reported as such
            status, detail = "run-error", f"harness: {type(e).__name__}: {e}"
    return suite, name, status, detail


def reason_of(detail):
    """Groups details: "1 unsupported operator (opset 13): TopK in ..." ->
    "unsupported operator TopK"."""
    m = re.search(r"unsupported operators? \(opset \d+\):\s*(\S+)", detail)
    if m:
        return f"unsupported operator {m.group(1)}"
    m = re.search(r"uses ONNX opset (\d+)", detail)
    if m:
        return f"opset {m.group(1)} (outside 6-17)"
    detail = re.sub(r"'[^']*'", "'...'", detail)
    detail = re.sub(r"tensor<[^>]*>", "tensor<...>", detail)
    return re.sub(r"\d+", "N", detail)[:120]


# Why a group of models does not pass, by the first model or reason that
# matches: Tessera's decision, or a flaw in the test data.
DECISIONS = [
    (r"StringNormalizer|STRING|Cast to STRING",
     "string tensors: the IPU has no string type; text belongs in the host's input pipeline"),
    (r"NonMaxSuppression|Unique|NonZero",
     "the output's shape depends on the input's values; static-shape compilation cannot place it"),
    (r"Bernoulli|bernoulli|RandomUniformLike|Dropout in training|training_dropout",
     "random numbers: the expected outputs come from NumPy's generator, which no device "
     "reproduces (Tessera's random ops and training-mode Dropout draw from its own "
     "counter-based generator)"),
    (r"operator (Loop|If|Scan|SequenceMap)\b",
     "data-dependent control flow: not imported yet (structured control flow is future work)"),
    (r"Optional|not a tensor",
     "optional and sequence graph inputs/outputs: executables take and return tensors"),
    (r"Gradient", "gradients are the training pipeline's job (building training graphs), not an operator's"),
    (r"test_adam_multiple",
     "test data: its expected outputs use epsilon 1e-2, but the node leaves epsilon at the "
     "schema's default 1e-6 (test_adam, with epsilon set, passes; fixed upstream in "
     "onnx/onnx#7763)"),
    (r"test_cast_FLOAT_to_BFLOAT16",
     "test data: expects bfloat16 by truncation; Tessera rounds to nearest even"),
    (r"--input-shape gives",
     "test data: the 'like' input's data is [1] while the model declares 3x4"),
]


def decision_of(models, why):
    for pattern, text in DECISIONS:
        if any(re.search(pattern, m) for m in models) or re.search(pattern, why):
            return text
    return ""


def write_doc(path, results, statuses):
    import collections
    lines = [
        "# ONNX backend conformance",
        "",
        "Generated by `test/conformance/run_conformance.py --write-doc` from the",
        "ONNX backend test data in Debian's `libonnx-testdata` (do not edit).",
        "Models are compiled by tessera-compile for ipu2 and run on the IPU model",
        "by `tessera-run`; outputs must match within rtol 1e-3 / atol 1e-7,",
        "exactly for integers and booleans. Inputs a model uses as shapes,",
        "axes, sizes or counts are bound to each test data set's values at",
        "compile time (`tessera-compile --constant-input`, one compile per data",
        "set), as static-shape compilation needs; the passes that did so are",
        "counted below the table.",
        "",
        "| suite | " + " | ".join(statuses) + " | total |",
        "|---|" + "---|" * (len(statuses) + 1),
    ]
    for suite in SUITES + ["all"]:
        rows = [r for r in results if suite in ("all", r[0])]
        if rows:
            counts = [sum(1 for r in rows if r[2] == s) for s in statuses]
            lines.append(f"| {suite} | " + " | ".join(map(str, counts)) + f" | {len(rows)} |")
    bound = [f"{s}/{n}" for s, n, st, d in results
             if st == "pass" and d.startswith("with --constant-input")]
    lines += ["", f"{len(bound)} of the passes bind inputs at compile time "
              "(`--constant-input`)."]
    # Grouped by status, reason and decision: one message (a wrong output)
    # can have different causes.
    reasons = collections.defaultdict(list)
    for s, n, st, d in results:
        if st != "pass":
            model, reason = f"{s}/{n}", reason_of(d)
            reasons[(st, reason, decision_of([model], reason))].append(model)
    lines += ["", "## Why models do not pass", "",
              "| models | status | reason | why | examples |", "|---|---|---|---|---|"]
    for (st, why, decision), models in sorted(reasons.items(),
                                              key=lambda kv: (-len(kv[1]), kv[0])):
        examples = ", ".join(sorted(models)[:3]) + (", ..." if len(models) > 3 else "")
        lines.append(f"| {len(models)} | {st} | {why.replace('|', '/')} | "
                     f"{decision} | {examples} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "bin"))
    parser.add_argument("--results", default="conformance-results.json")
    parser.add_argument("--expected", help="file of models that must pass")
    parser.add_argument("--update-expected", action="store_true")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--filter", default="", help="only cases containing this")
    parser.add_argument("--write-doc", help="write the coverage document (markdown)")
    parser.add_argument("--from-results", help="use this results file instead of running")
    parser.add_argument("--device", choices=["ipu", "reference"], default="ipu",
                        help="run outputs on the IPU model (default) or the host reference")
    args = parser.parse_args()
    tools = {"compile": os.path.join(args.tools, "tessera-compile"),
             "run": os.path.join(args.tools, "tessera-run"), "device": args.device}
    cases = [(s, n, tools) for s in SUITES if os.path.isdir(os.path.join(DATA, s))
             for n in sorted(os.listdir(os.path.join(DATA, s))) if args.filter in n]
    if not cases:
        sys.exit(f"no test data under {DATA} (install libonnx-testdata)")
    results = []
    if args.from_results:
        # Summarize (and write the doc or the expected list from) an
        # earlier run, e.g. the one ctest just made.
        with open(args.from_results) as f:
            results = [(r["suite"], r["model"], r["status"], r["detail"])
                       for r in json.load(f)]
    else:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for r in pool.map(run_case, cases):
                results.append(r)
    statuses = ["pass", "wrong", "compile-error", "run-error", "crash"]
    print(f"{'suite':20s} " + " ".join(f"{s:>13s}" for s in statuses) + f" {'total':>7s}")
    for suite in SUITES + ["all"]:
        rows = [r for r in results if suite in ("all", r[0])]
        if not rows:
            continue
        counts = [sum(1 for r in rows if r[2] == s) for s in statuses]
        print(f"{suite:20s} " + " ".join(f"{c:13d}" for c in counts) + f" {len(rows):7d}")
    passed = sum(1 for r in results if r[2] == "pass")
    if not args.from_results:
        with open(args.results, "w") as f:
            json.dump([{"suite": s, "model": n, "status": st, "detail": d}
                       for s, n, st, d in results], f, indent=1)
    print(f"conformance: {passed} of {len(results)} models pass "
          f"({100.0 * passed / len(results):.1f}%), results in {args.results}")
    if args.write_doc:
        write_doc(args.write_doc, results, statuses)
    ok = True
    if args.expected:
        ids = {f"{s}/{n}" for s, n, st, _ in results if st == "pass"}
        if args.update_expected:
            with open(args.expected, "w") as f:
                f.write("".join(f"{i}\n" for i in sorted(ids)))
        else:
            with open(args.expected) as f:
                expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}
            for r in results:
                if f"{r[0]}/{r[1]}" in expected and r[2] != "pass":
                    print(f"REGRESSION {r[0]}/{r[1]}: {r[2]}: {r[3]}")
                    ok = False
    crashes = [r for r in results if r[2] == "crash"]
    for r in crashes:
        print(f"CRASH {r[0]}/{r[1]}: {r[3]}")
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if ok and not crashes else 1)


if __name__ == "__main__":
    main()
