#!/usr/bin/python3
"""The report page's size and load time, and what writing it costs a compile.

For each model (default: ResNet-50's training step at micro-batch 1, SGD,
and its inference at batch 1): the compile without and with `--report`
(alternating, `--rounds` times each), the report files' sizes, and the
page's load time in headless Chromium (opened `--rounds` times in one
browser: to the end of its script, every view built), with its console
errors. The issue's bar: a ResNet-50 training step's page loads in under 3 s
and is under 20 MB. Not a test: compare figures of one sitting.

    benchmarks/report_page.py [--rounds 3] [--models resnet50-train,resnet50]
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "bench"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from benchutil import ROOT, export, timed  # noqa: E402
import report_views  # noqa: E402

COMPILE = os.path.join(ROOT, "build", "bin", "tessera-compile")
MODELS = {
    "resnet50-train": ("resnet50", ["--train", "--loss", "cross-entropy", "--optimizer",
                                    "sgd:lr=0.01", "--micro-batch-size", "1"]),
    "resnet50": ("resnet50", []),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, report_views.Browser() as browser:
        for name in args.models.split(","):
            model, flags = MODELS[name]
            onnx_path = os.path.join(tmp, model + ".onnx")
            if not os.path.exists(onnx_path):
                export(model, onnx_path)
            plain, reported = [], []
            report = os.path.join(tmp, name + "-report")
            for _ in range(args.rounds):
                plain.append(timed([COMPILE, onnx_path, *flags, "-o",
                                    os.path.join(tmp, "a.tess")])[0])
                reported.append(timed([COMPILE, onnx_path, *flags, "-o",
                                       os.path.join(tmp, "b.tess"), "--report", report])[0])
            page = os.path.join(report, "report.html")
            loads = [browser.open(page) for _ in range(args.rounds)]
            errors = browser.console_errors()
            mb = lambda f: os.path.getsize(os.path.join(report, f)) / 1e6
            print(f"{name}: compile {min(plain):.2f} s, with --report {min(reported):.2f} s "
                  f"(+{min(reported) - min(plain):.2f} s); report.html {mb('report.html'):.1f} MB, "
                  f"report.json {mb('report.json'):.1f} MB; page loads in "
                  f"{min(loads):.2f} s (median {statistics.median(loads):.2f} s, first "
                  f"{loads[0]:.2f} s); console errors: {len(errors)}")


if __name__ == "__main__":
    main()
