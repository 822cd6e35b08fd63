# Report pages: tessera-compile --report (also on a cache hit and when the
# program does not fit), ipu-allocate-memory's report, tessera-report from
# an executable (with a run's profile) or a saved report, tessera-run
# --report, and their errors.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/matmul.onnx --tiles-per-ipu=16 --cache-dir %t/cache --report %t/r1 -o %t/a.tess
# RUN: test -s %t/r1/report.html && test -s %t/r1/report.json
# RUN: %python %s %t check r1 fits 16
# A cache hit writes the report too (the command is not recorded for the
# front end, which cannot write one).
# RUN: tessera-compile %t/matmul.onnx --tiles-per-ipu=16 --cache-dir %t/cache --report %t/r2 -o %t/b.tess 2>&1 | FileCheck %s --check-prefix=HIT
# RUN: cmp %t/r1/report.json %t/r2/report.json
# RUN: tessera-report %t/a.tess -o %t/r3 | FileCheck %s --check-prefix=WROTE
# RUN: cmp %t/r1/report.json %t/r3/report.json
# The page of a saved report, written again.
# RUN: rm %t/r3/report.html && tessera-report %t/r3 && test -s %t/r3/report.html
# With a run's profile: the host times per step.
# RUN: tessera-run %t/a.tess --input x=%t/x.npy --profile %t/prof > /dev/null
# RUN: tessera-report %t/a.tess --profile %t/prof -o %t/r4
# RUN: %python %s %t check r4 executed 16
# RUN: tessera-run %t/a.tess --input x=%t/x.npy --report %t/r5 | FileCheck %s --check-prefix=RUNREPORT
# RUN: %python %s %t check r5 executed 16
# A program that does not fit: the report of what each tile would need,
# from the allocator, and no executable.
# RUN: not tessera-compile %t/matmul.onnx --tiles-per-ipu=7 --report %t/r6 -o %t/c.tess 2>&1 | FileCheck %s --check-prefix=OOM
# RUN: test ! -e %t/c.tess
# RUN: %python %s %t check r6 oom 7
# The pass alone, on the IPU-phase module.
# RUN: tessera-compile %t/matmul.onnx --tiles-per-ipu=16 --compile-to=ipu -o %t/m.mlir
# RUN: tessera-opt %t/m.mlir --ipu-allocate-memory=report=%t/r7 -o /dev/null
# RUN: %python %s %t check r7 fits 16
# Errors name the file and what to do.
# RUN: not tessera-report %t/a.tess 2>&1 | FileCheck %s --check-prefix=NO-DIR
# RUN: not tessera-report %t/matmul.onnx -o %t/r8 2>&1 | FileCheck %s --check-prefix=NOT-TESS
# RUN: test ! -e %t/r8
# RUN: not tessera-report %t/a.tess --profile %t/r1 -o %t/r8 2>&1 | FileCheck %s --check-prefix=NO-PROFILE
# RUN: echo '{"format": "tessera-report", "version": 99}' > %t/r3/report.json
# RUN: not tessera-report %t/r3 2>&1 | FileCheck %s --check-prefix=VERSION
# RUN: not tessera-report %t/r1 -o %t/r9 2>&1 | FileCheck %s --check-prefix=DIR-O
# RUN: not tessera-run %t/a.tess --reference --input x=%t/x.npy --report %t/r9 2>&1 | FileCheck %s --check-prefix=REFERENCE
# RUN: touch %t/file && not tessera-compile %t/matmul.onnx --tiles-per-ipu=16 --report %t/file/r -o %t/d.tess 2>&1 | FileCheck %s --check-prefix=UNWRITABLE

# HIT: cache hit
# WROTE: report written to {{.*}}r3/report.html
# RUNREPORT: report written to {{.*}}r5/report.html
# OOM: error: out of tile memory: tile {{[0-9]+}} needs
# OOM: note: report written to '{{.*}}r6/report.html'
# NO-DIR: error: give the report directory to write: tessera-report {{.*}}a.tess -o DIR
# NOT-TESS: error: {{.*}}matmul.onnx
# NO-PROFILE: error: cannot read '{{.*}}r1/profile.json'
# VERSION: error: '{{.*}}report.json' is a report of version 99; this Tessera reads version 1 (make it again with tessera-report EXECUTABLE)
# DIR-O: error: '{{.*}}r1' is a report directory: its page is written in it; -o and --profile are for an executable
# REFERENCE: error: --report needs the IPU model; drop --reference
# UNWRITABLE: error: the executable '{{.*}}d.tess' was written, but not its report in '{{.*}}file/r': cannot create the report directory

import json
import os
import sys

import numpy as np

if len(sys.argv) > 2 and sys.argv[2] == "check":
    root, name, kind, tiles = sys.argv[1], sys.argv[3], sys.argv[4], int(sys.argv[5])
    with open(os.path.join(root, name, "report.json")) as f:
        r = json.load(f)
    assert r["format"] == "tessera-report" and r["version"] == 1
    assert r["memory"]["tiles"] == tiles and len(r["memory"]["peak_bytes"]) == tiles
    assert r["fits"] == (kind != "oom"), r.get("error")
    page = open(os.path.join(root, name, "report.html")).read()
    assert "/*TESSERA_REPORT_DATA*/" not in page and '"tessera-report"' in page
    # Every tile's categories add up to its peak.
    m = r["memory"]
    for t in range(tiles):
        assert m["peak_bytes"][t] == sum(m[c][t] for c in
                                   ("weights", "activations", "temporaries", "code"))
    if kind == "oom":
        tile = r["out_of_memory"]["tile"]
        assert m["peak_bytes"][tile] > r["target"]["bytes_per_tile"]
        assert "out of tile memory" in r["error"]
    if kind == "executed":
        assert all("host_compute_ms" in s for s in r["steps"])
        assert "host_compute_ms" in r["execution"]
    sys.exit(0)

from onnx_gen import T, init, node, save, vi

os.makedirs(sys.argv[1], exist_ok=True)
n = 640
weight = (np.random.RandomState(0).randn(n, n) * 0.01).astype(np.float32)
save("matmul", [node("MatMul", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [n, n])],
     [vi("y", T.FLOAT, [n, n])], [init("w", weight)])
np.save(os.path.join(sys.argv[1], "x.npy"), np.ones((n, n), np.float32))
