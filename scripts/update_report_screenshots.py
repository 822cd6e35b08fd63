#!/usr/bin/python3
"""Makes docs/images/report/*.png, the report page's views as docs/report.md
shows them, with the same driver as the page's tests (report_views.py):

  resnet18-*.png   torchvision's resnet18 (random weights), compiled and run
                   once with --report: every view, tile 700 clicked
  oom-memory.png   the same on a 64-tile chip, where it does not fit
  pipeline-*.png   a 4-layer MLP's training step pipelined over 4 IPUs

    scripts/update_report_screenshots.py      (after scripts/build.sh)
"""
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export_model  # noqa: E402
import report_views  # noqa: E402

BIN = HERE.parent / "build" / "bin"
OUT = HERE.parent / "docs" / "images" / "report"


def tool(name, *args, check=True):
    return subprocess.run([str(BIN / name), *map(str, args)], check=check,
                          capture_output=True, text=True)


def keep(shots, prefix, views):
    for view in views:
        (shots / f"{view}.png").replace(OUT / f"{prefix}-{view}.png")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, report_views.Browser() as browser:
        tmp = pathlib.Path(tmp)
        export_model.export("resnet18", str(tmp / "resnet18.onnx"), 17)
        tool("tessera-compile", tmp / "resnet18.onnx", "-o", tmp / "r.tess")
        np.save(tmp / "x.npy", np.random.default_rng(0).random((1, 3, 224, 224), np.float32))
        tool("tessera-run", tmp / "r.tess", "--input", f"input={tmp / 'x.npy'}", "--warmup", 1,
             "--iterations", 3, "--report", tmp / "run")
        views = report_views.screenshot_views(browser, tmp / "run" / "report.html",
                                              tmp / "shots", tile=700)
        keep(tmp / "shots", "resnet18", views)
        tool("tessera-compile", tmp / "resnet18.onnx", "--tiles-per-ipu", 64, "--report",
             tmp / "oom", "-o", tmp / "oom.tess", check=False)
        report_views.screenshot_views(browser, tmp / "oom" / "report.html", tmp / "shots")
        keep(tmp / "shots", "oom", ["memory"])
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(*[m for _ in range(4)
                                    for m in (torch.nn.Linear(256, 256), torch.nn.Tanh())])
        torch.onnx.export(mlp, torch.randn(8, 256), str(tmp / "mlp.onnx"), opset_version=17,
                          input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        tool("tessera-compile", tmp / "mlp.onnx", "--train", "--loss", "mse", "--optimizer",
             "adam:lr=0.01", "--micro-batch-size", 8, "--gradient-accumulation", 4,
             "--num-ipus", 4, "--pipeline", "auto", "--tiles-per-ipu", 64,
             "--report", tmp / "pipelined", "-o", tmp / "p.tess")
        report_views.screenshot_views(browser, tmp / "pipelined" / "report.html", tmp / "shots")
        keep(tmp / "shots", "pipeline", ["summary", "pipeline"])
        if browser.console_errors():
            sys.exit(f"console errors: {browser.console_errors()}")
    print("wrote", ", ".join(sorted(p.name for p in OUT.glob("*.png"))))


if __name__ == "__main__":
    main()
