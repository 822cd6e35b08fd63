"""Resource limits are errors, not signals: out of memory (LLVM's
allocators, operator new) and failed thread creation print a message and
exit with status 1, leaving no output or temporary file behind."""
import os
import resource
import subprocess

import numpy as np

from conftest import tool
from onnx_gen import T, init, node, save, vi


def limited(args, megabytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))
    return subprocess.run(args, capture_output=True, text=True, preexec_fn=limit)


def test_compiling_out_of_memory_is_an_error(tmp_path):
    save("mlp", [node("MatMul", ["x", "w"], ["m"]), node("Relu", ["m"], ["y"])],
         [vi("x", T.FLOAT, [4, 64])], [vi("y", T.FLOAT, [4, 64])],
         [init("w", np.ones((64, 64), np.float32))], outdir=str(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    # From too little address space to load the libraries (the loader's own
    # message, status 127) up to enough: every failure in between is a
    # message and status 1, never a signal, and writes nothing.
    errors = 0
    for megabytes in range(300, 500, 20):
        for f in os.listdir(out):
            os.remove(out / f)
        result = limited([tool("tessera-compile"), str(tmp_path / "mlp.onnx"),
                          "-o", str(out / "mlp.tess")], megabytes)
        if result.returncode in (0, 127):
            continue
        assert result.returncode == 1, (megabytes, result.returncode, result.stderr[-2000:])
        assert result.stderr.startswith("tessera-compile: error: "), result.stderr[-2000:]
        assert "nothing was written" in result.stderr
        assert os.listdir(out) == [], megabytes
        errors += 1
    assert errors > 0, "no limit in the sweep ran out of memory: widen it"
    # And with room to work it compiles.
    assert subprocess.run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "-o",
                           str(out / "mlp.tess")]).returncode == 0
