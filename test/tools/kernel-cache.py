# The persistent kernel cache (--cache-dir's kernels/): a compile that
# misses the executable cache takes every vertex kernel it has compiled
# before from there, found by its code before lowering (not lowered again)
# or after; kernels are named by their code, so the outputs and estimates
# are those of a compile without the cache, and the executable is the one a
# cold cache gives. Entries of another target CPU or another compiler build
# are never used; a damaged one is compiled again; a cache that cannot be
# written only warns.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cache -o %t/a.tess 2>&1 | FileCheck %s --check-prefix=COLD
# Another output mode: another executable, the same kernels.
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cache --output-mode sum -o %t/b.tess 2>&1 | FileCheck %s --check-prefix=WARM
# RUN: tessera-compile %t/mlp.onnx -o %t/plain.tess
# RUN: tessera-run %t/a.tess --input=x=%t/x.npy --output=%t/a.npz > %t/a.txt
# RUN: tessera-run %t/b.tess --input=x=%t/x.npy --output=%t/b.npz > %t/b.txt
# RUN: tessera-run %t/plain.tess --input=x=%t/x.npy --output=%t/plain.npz > %t/plain.txt
# RUN: %python %s same %t a.npz b.npz plain.npz
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cold --output-mode sum -o %t/b-cold.tess
# RUN: cmp %t/b.tess %t/b-cold.tess
# Another target CPU: none of these entries.
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cache --host-cpu=x86-64 -o %t/c.tess 2>&1 | FileCheck %s --check-prefix=COLD
# Another compiler build (a library of different bytes): none either.
# RUN: %python %s rebuild %t
# RUN: env TESSERA_TORCHSCRIPT_PLUGIN=%t/plugin.so tessera-compile %t/mlp.onnx --cache-dir %t/cache --output-mode final -o %t/d.tess 2>&1 | FileCheck %s --check-prefix=COLD
# Damaged entries are compiled again (and replaced).
# RUN: %python %s damage %t/cache/kernels
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cache --device-iterations 2 -o %t/e.tess 2>&1 | FileCheck %s --check-prefix=COLD
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cache --device-iterations 3 -o %t/f.tess 2>&1 | FileCheck %s --check-prefix=WARM
# Damaged index entries (code before lowering -> object): the kernels are
# lowered again and found by their code after.
# RUN: %python %s damage-index %t/cache/kernels
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/cache --output-mode final -o %t/h.tess 2>&1 | FileCheck %s --check-prefix=LOWERED
# RUN: tessera-run %t/h.tess --input=x=%t/x.npy --output=%t/h.npz
# RUN: %python %s same %t a.npz h.npz
# A cache whose kernels/ cannot be made: a warning, the executable written.
# RUN: mkdir -p %t/blocked && touch %t/blocked/kernels
# RUN: tessera-compile %t/mlp.onnx --cache-dir %t/blocked -o %t/g.tess 2>&1 | FileCheck %s --check-prefix=BLOCKED
# RUN: tessera-run %t/g.tess --input=x=%t/x.npy --output=%t/g.npz
# RUN: %python %s same %t a.npz g.npz

# COLD: kernel cache: 0 of [[N:[0-9]+]] vertex kernels reused (0 before lowering), [[N]] compiled and stored
# WARM: kernel cache: [[N:[0-9]+]] of [[N]] vertex kernels reused ([[N]] before lowering), 0 compiled and stored
# LOWERED: kernel cache: [[N:[0-9]+]] of [[N]] vertex kernels reused (0 before lowering), 0 compiled and stored
# BLOCKED: warning: cannot create the kernel cache {{.*}}kernels
import glob
import os
import shutil
import sys

import numpy as np

out = sys.argv[-1] if sys.argv[1] != "same" else sys.argv[2]
if sys.argv[1] == "same":
    # The same outputs and, where the runs were kept, the same estimate.
    def estimate(name):
        path = os.path.join(out, name.replace(".npz", ".txt"))
        if not os.path.exists(path):
            return None
        lines = [l for l in open(path) if l.startswith("estimated on ipu2:")]
        assert lines, path
        return lines[0]
    first = np.load(os.path.join(out, sys.argv[3]))
    for name in sys.argv[4:]:
        other = np.load(os.path.join(out, name))
        assert all(np.array_equal(first[k], other[k]) for k in first), name
        if estimate(name) is not None:
            assert estimate(name) == estimate(sys.argv[3]), (name, estimate(name))
    sys.exit(0)
if sys.argv[1] == "rebuild":
    tools = os.path.dirname(shutil.which("tessera-compile"))
    plugin = os.path.join(tools, "..", "lib", "libTesseraTorchScriptPlugin.so")
    shutil.copy(plugin, os.path.join(out, "plugin.so"))
    with open(os.path.join(out, "plugin.so"), "ab") as f:
        f.write(b"\0")  # another build, as far as its bytes go
    sys.exit(0)
if sys.argv[1] == "damage":
    for entry in glob.glob(os.path.join(sys.argv[2], "*.o")):
        with open(entry, "r+b") as f:
            f.truncate(64)
    sys.exit(0)
if sys.argv[1] == "damage-index":
    entries = glob.glob(os.path.join(sys.argv[2], "*.name"))
    assert entries, "no index entries"
    for i, entry in enumerate(entries):
        with open(entry, "w") as f:
            # Not a name; a name of no object.
            f.write("\x00garbage" if i % 2 else "vertex_" + "0" * 32 + "\n")
    sys.exit(0)

from onnx_gen import tanh_mlp

rng = np.random.RandomState(0)
tanh_mlp("mlp", rng)
np.save(os.path.join(out, "x.npy"), rng.randn(16, 32).astype(np.float32))
