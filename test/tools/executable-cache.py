# The executable cache: miss then hit, any code-changing option misses,
# damaged and mismatched entries are detected and rebuilt.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --cache-dir %t/cache -o %t/a.tess 2>&1 | FileCheck %s --check-prefix=MISS
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --cache-dir %t/cache -o %t/b.tess 2>&1 | FileCheck %s --check-prefix=HIT
# RUN: cmp %t/a.tess %t/b.tess
# Outputs are copies: editing one in place changes neither the entry nor
# the next hit's output.
# RUN: %python %s edit %t/b.tess
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --cache-dir %t/cache -o %t/b2.tess 2>&1 | FileCheck %s --check-prefix=HIT
# RUN: cmp %t/a.tess %t/b2.tess
# RUN: not cmp -s %t/a.tess %t/b.tess
# RUN: env TESSERA_CACHE_DIR=%t/cache tessera-compile %t/model.onnx --input-shape x=2x8 -o %t/c.tess 2>&1 | FileCheck %s --check-prefix=HIT
# RUN: tessera-compile %t/model.onnx --input-shape x=4x8 --cache-dir %t/cache -o %t/d.tess 2>&1 | FileCheck %s --check-prefix=MISS
# RUN: tessera-run %t/d.tess --reference --input x=%t/x4.npy | FileCheck %s --check-prefix=RUN4
# The CPU native code is generated for is a codegen option too.
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --host-cpu=generic --cache-dir %t/cache -o %t/h.tess 2>&1 | FileCheck %s --check-prefix=MISS
# RUN: tessera-run %t/h.tess --input x=%t/x2.npy | FileCheck %s --check-prefix=RUN2
# An entry stored under another key is a false hit: recompiled.
# RUN: %python %s swap %t/cache
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --cache-dir %t/cache -o %t/g.tess 2>&1 | FileCheck %s --check-prefix=FALSE
# RUN: tessera-run %t/g.tess --reference --input x=%t/x2.npy | FileCheck %s --check-prefix=RUN2
# A damaged entry is reported, recompiled and replaced.
# RUN: %python %s damage %t/cache
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --cache-dir %t/cache -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=DAMAGED
# RUN: tessera-compile %t/model.onnx --input-shape x=2x8 --cache-dir %t/cache -o %t/f.tess 2>&1 | FileCheck %s --check-prefix=HIT
# A killed compile's temporary file is removed once it is an hour old; a
# fresh one (a compile still running) stays.
# RUN: %python %s stale %t/cache
# RUN: tessera-compile %t/model.onnx --input-shape x=3x8 --cache-dir %t/cache -o %t/s.tess 2>&1 | FileCheck %s --check-prefix=MISS
# RUN: not test -e %t/cache/old.tess.tmp-abc123
# RUN: test -e %t/cache/new.tess.tmp-def456

# MISS: cache miss: compiling into {{.*}}cache{{/|\\}}[[KEY:[0-9a-f]+]].tess
# HIT: cache hit: {{.*}}.tess -> {{.*}}.tess
# DAMAGED: warning: cache entry {{.*}} is unusable ({{.*}}damaged (checksum mismatch){{.*}}); recompiling
# FALSE: warning: false cache hit on {{.*}} (stored key {{[0-9a-f]+}}); recompiling
# RUN4: output: 4x8xf32
# RUN2: output: 2x8xf32
import glob
import os
import sys

import numpy as np

if sys.argv[1] == "damage":
    for path in glob.glob(os.path.join(sys.argv[2], "*.tess")):
        data = bytearray(open(path, "rb").read())
        data[-3] ^= 0xFF
        os.remove(path)
        open(path, "wb").write(data)
elif sys.argv[1] == "edit":
    with open(sys.argv[2], "r+b") as f:  # in place, as dd conv=notrunc
        f.seek(-3, os.SEEK_END)
        f.write(b"\x00\x01\x02")
elif sys.argv[1] == "stale":
    import time
    for name, age in (("old.tess.tmp-abc123", 7200), ("new.tess.tmp-def456", 0)):
        path = os.path.join(sys.argv[2], name)
        open(path, "wb").write(b"partial")
        os.utime(path, (time.time() - age, time.time() - age))
elif sys.argv[1] == "swap":
    # Every entry gets the content of another one.
    entries = sorted(glob.glob(os.path.join(sys.argv[2], "*.tess")))
    contents = [open(p, "rb").read() for p in entries]
    for path, data in zip(entries, contents[1:] + contents[:1]):
        os.remove(path)
        open(path, "wb").write(data)
else:
    from onnx_gen import T, init, node, save, vi
    out = sys.argv[1]
    save("model", [node("MatMul", ["x", "w"], ["m"]), node("Relu", ["m"], ["output"])],
         [vi("x", T.FLOAT, ["batch", 8])], [vi("output", T.FLOAT, ["batch", 8])],
         [init("w", np.eye(8, dtype=np.float32))], outdir=out)
    np.save(os.path.join(out, "x2.npy"), np.ones((2, 8), np.float32))
    np.save(os.path.join(out, "x4.npy"), np.ones((4, 8), np.float32))
