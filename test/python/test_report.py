"""The report page (tessera-compile/tessera-run --report, tessera-report) in
headless Chromium, and its data through tessera.profile.

The page of a model loads with no console errors, shows as many tiles as the
target has, lists a clicked tile's variables, and shows the compiler's
numbers (tessera-compile --summary's); the page of a program that does not
fit highlights the tile the error names. Each view's screenshot is written
(to $TESSERA_REPORT_SCREENSHOTS when set, else the test's directory) by
scripts/report_views.py, which also makes the docs' pictures.
"""
import json
import os
import pathlib
import re

import numpy as np
import pytest
import torch

from conftest import run, tool
import export_model
import report_views

import tessera
import tessera.profile


@pytest.fixture(scope="module")
def browser():
    if not report_views.available():
        pytest.fail("Chromium and ChromeDriver are missing: scripts/install-deps.sh installs "
                    "Debian's chromium and chromium-driver")
    with report_views.Browser() as b:
        yield b


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory):
    """resnet18 compiled with --report and --summary."""
    d = tmp_path_factory.mktemp("resnet18")
    export_model.export("resnet18", str(d / "model.onnx"), 17)
    result = run([tool("tessera-compile"), str(d / "model.onnx"), "-o", str(d / "model.tess"),
                  "--report", str(d / "report"), "--summary"])
    assert result.returncode == 0, result.stderr
    return d, result.stdout


def screenshots(name):
    root = os.environ.get("TESSERA_REPORT_SCREENSHOTS")
    return pathlib.Path(root) / name if root else None


def summary_figures(text):
    cycles = re.search(r"one iteration \(batch \d+\): ([\d,]+) cycles", text)
    peak = re.search(r"tile memory: peak ([\d,]+) B on tile (\d+)", text)
    assert cycles and peak, text
    return (int(cycles.group(1).replace(",", "")), int(peak.group(1).replace(",", "")),
            int(peak.group(2)))


def value(browser, css):
    return float(browser.script(f"return document.querySelector('{css}').dataset.value"))


def test_page_shows_every_tile_and_the_compilers_numbers(browser, resnet18, tmp_path):
    d, summary = resnet18
    page = d / "report" / "report.html"
    views = report_views.screenshot_views(browser, page, screenshots("resnet18") or tmp_path,
                                          tile=700)
    assert views == ["summary", "memory", "liveness", "operations"]
    assert browser.console_errors() == []
    # As many tiles as ipu2 has, one IPU.
    assert len(browser.find_all(".tiles .tile")) == 1472
    # The summary's numbers.
    cycles, peak, tile = summary_figures(summary)
    assert value(browser, "#est-cycles") == cycles
    assert value(browser, "#mem-max") == peak
    assert browser.find_all(f'.tile.max[data-tile="{tile}"]')
    # A clicked tile lists what report.json has on it, and its peak.
    data = json.loads((d / "report" / "report.json").read_text())
    browser.click("#tab-memory")
    browser.click('.tile[data-tile="700"]')
    assert browser.text("#tile-title").startswith("Tile 700 (IPU 0")
    on_tile = [i for i in data["items"]
               if any(f <= 700 < f + n for f, n, _ in i["tiles"])]
    rows = browser.find_all("#tile-variables tr")
    assert len(rows) == 1 + len(on_tile) + (data["memory"]["code"][700] > 0)
    assert value(browser, "#tile-peak") == data["memory"]["peak_bytes"][700]
    # The steps table: one row per step, sortable.
    browser.click("#tab-operations")
    assert len(browser.find_all("#ops-table tr[data-step]")) == len(data["steps"])
    first = browser.script("return document.querySelector('#ops-table tr[data-step]').dataset.step")
    costliest = max(range(len(data["steps"])), key=lambda i: data["steps"][i]["cycles"])
    assert int(first) == costliest
    browser.click("#ops-table th:nth-child(5)")  # cycles again: ascending
    first = browser.script("return document.querySelector('#ops-table tr[data-step]').dataset.step")
    assert data["steps"][int(first)]["cycles"] == min(s["cycles"] for s in data["steps"])
    assert browser.console_errors() == []


def test_page_of_a_program_that_does_not_fit_highlights_the_tile(browser, resnet18, tmp_path):
    d, _ = resnet18
    report = tmp_path / "oom"
    result = run([tool("tessera-compile"), str(d / "model.onnx"), "--tiles-per-ipu", "64",
                  "--report", str(report), "-o", str(tmp_path / "oom.tess")])
    assert result.returncode == 1
    assert not (tmp_path / "oom.tess").exists()
    named = int(re.search(r"out of tile memory: tile (\d+) needs", result.stderr).group(1))
    assert f"report written to '{report}/report.html'" in result.stderr
    views = report_views.screenshot_views(browser, report / "report.html",
                                          screenshots("out_of_memory") or tmp_path)
    assert "memory" in views
    assert browser.console_errors() == []
    browser.click("#tab-memory")
    assert len(browser.find_all(".tiles .tile")) == 64
    highlighted = browser.find_all(".tile.oom")
    assert len(highlighted) == 1
    assert browser.script("return document.querySelector('.tile.oom').dataset.tile") == str(named)
    # Selected from the start, with the error and its advice.
    assert browser.text("#tile-title").startswith(f"Tile {named} ")
    advice = browser.text("#oom-advice")
    assert f"tile {named} needs" in advice and "Try:" in advice
    # The tile is shown over its capacity.
    data = json.loads((report / "report.json").read_text())
    assert data["fits"] is False
    assert data["memory"]["peak_bytes"][named] > data["target"]["bytes_per_tile"]
    assert browser.find_all(f'.tile.over[data-tile="{named}"]')


def test_run_report_shows_the_ipu_models_host_times(browser, resnet18, tmp_path):
    d, _ = resnet18
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((1, 3, 224, 224), np.float32))
    report = tmp_path / "run"
    result = run([tool("tessera-run"), str(d / "model.tess"), "--input",
                  f"input={tmp_path / 'x.npy'}", "--report", str(report)])
    assert result.returncode == 0, result.stderr
    report_views.screenshot_views(browser, report / "report.html",
                                  screenshots("run") or tmp_path)
    assert browser.console_errors() == []
    browser.click("#tab-execution")
    assert value(browser, "#exec-measured") > 0
    data = tessera.profile.open(report)
    assert data.execution is not None
    timed = [s for s in data.steps if s.host_ms is not None]
    assert len(timed) == len(data.steps)
    assert len(browser.find_all("#exec-table tr")) == 1 + len(timed)
    # The same report as the executable's, plus the times.
    again = tmp_path / "again"
    assert run([tool("tessera-report"), str(d / "model.tess"), "-o", str(again)]).returncode == 0
    plain = json.loads((again / "report.json").read_text())
    timedData = json.loads((report / "report.json").read_text())
    assert plain["memory"] == timedData["memory"] and plain["items"] == timedData["items"]


def test_pipeline_view_shows_each_ipu_and_its_bubbles(browser, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)])
    torch.onnx.export(net, torch.randn(8, 64), str(tmp_path / "mlp.onnx"), opset_version=17,
                      input_names=["x"])
    report = tmp_path / "pipelined"
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--num-ipus", "2",
                  "--tiles-per-ipu", "32", "--pipeline", "auto", "--device-iterations", "4",
                  "--report", str(report), "-o", str(tmp_path / "p.tess")])
    assert result.returncode == 0, result.stderr
    views = report_views.screenshot_views(browser, report / "report.html",
                                          screenshots("pipelined") or tmp_path)
    assert "pipeline" in views
    assert browser.console_errors() == []
    browser.click("#tab-memory")
    assert len(browser.find_all(".tiles")) == 2
    assert len(browser.find_all(".tiles .tile")) == 64
    browser.click("#tab-pipeline")
    assert browser.find_all("#pipeline-timeline")
    assert len(browser.find_all("#pipeline-table tr")) == 3
    data = tessera.profile.open(report)
    assert data.program["pipeline_stages"] == 2
    slot = max(data.estimate["ipu_cycles"])
    assert data.estimate["fill_cycles"] == slot


def test_profile_api_agrees_with_the_report(resnet18):
    d, summary = resnet18
    report = tessera.profile.open(d / "report")
    cycles, peak, tile = summary_figures(summary)
    assert report.fits and report.estimate["cycles"] == cycles
    assert report.fullest_tile.index == tile and report.fullest_tile.peak_bytes == peak
    assert len(report.tiles) == 1472
    # A tile's categories add up to its peak, and its liveness peaks there.
    t = report.tiles[700]
    assert sum(t.memory.values()) == t.peak_bytes
    assert max(t.liveness) == t.peak_bytes
    # Every variable's bytes are on its tiles; the chip's liveness is the
    # sum over the tiles' at each step.
    for v in report.variables[:50]:
        assert sum(v.tiles.values()) == v.bytes
    step = report.peak_step
    code = sum(x.memory["code"] for x in report.tiles)
    assert report.liveness[step] == code + sum(v.bytes for v in report.live_at(step))
    assert report.liveness[step] == max(report.liveness)
    # Ops by source op, costliest first.
    ops = list(report.ops.values())
    assert ops == sorted(ops, reverse=True)


def test_python_api_writes_reports_as_poptorch_profiling_does(tmp_path, monkeypatch):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(4, 16)
    opts = tessera.Options().enableProfiling(str(tmp_path / "profiles"))
    tessera.inferenceModel(net, opts)(x)
    report = tessera.profile.open(tmp_path / "profiles" / "inference")
    assert report.fits and report.program["training"] is False
    # Poplar's autoReport options, as Lightning's IPUStrategy(autoreport=True)
    # sets them: the training step's report.
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps(
        {"autoReport.all": "true", "autoReport.directory": str(tmp_path / "auto")}))
    model = torch.nn.Sequential(torch.nn.Linear(16, 4))

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x, y):
            out = self.model(x)
            return out, torch.nn.functional.cross_entropy(out, y)

    training = tessera.trainingModel(WithLoss(), tessera.Options(),
                                     tessera.optim.SGD(model.parameters(), lr=0.1))
    training(x, torch.tensor([0, 1, 2, 3]))
    report = tessera.profile.open(tmp_path / "auto" / "training")
    assert report.program["training"] is True
    phases = {s.phase for s in report.steps}
    assert {"forward", "backward", "update"} <= phases
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "{not json")
    with pytest.raises(tessera.Error, match="POPLAR_ENGINE_OPTIONS is not valid JSON"):
        tessera.inferenceModel(net, tessera.Options())(x)
    with pytest.raises(tessera.Error, match="no report at"):
        tessera.profile.open(tmp_path / "nowhere")
