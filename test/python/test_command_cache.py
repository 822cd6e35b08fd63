"""tessera-compile's front end: a command seen before is a cache lookup.

bin/tessera-compile links LLVM's support library only. A command line the
compiler built (or found in the executable cache) is recorded in the cache
under a key of its arguments, the files they name, the TESSERA_ environment,
the host CPU and the compiler's files; run again, the front end copies the
recorded entry (its checksum checked) without loading MLIR or LLVM's shared
libraries. Anything else goes to the compiler (libexec/tessera-compile).
"""
import os
import subprocess
import time

import numpy as np
import pytest

import onnx_gen as G
from conftest import run, tool

SMALL_TARGET = ["--tiles-per-ipu", "16"]


def model(path, seed=0):
    rng = np.random.RandomState(seed)
    return G.save("mm", [G.node("MatMul", ["x", "w"], ["h"]), G.node("Relu", ["h"], ["y"])],
                  [G.vi("x", G.T.FLOAT, [2, 8])], [G.vi("y", G.T.FLOAT, [2, 4])],
                  [G.init("w", rng.randn(8, 4).astype(np.float32))], outdir=str(path))


def compile_(tmp_path, out, *extra, env=None):
    args = [tool("tessera-compile"), str(tmp_path / "mm.onnx"), *SMALL_TARGET,
            "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / out), *extra]
    return run(args, env=env)


def loaded_libraries(tmp_path, out, *extra, env=None):
    """The shared objects the run of this command opened (the dynamic
    loader's own account), and its result."""
    env = dict(env or os.environ, LD_DEBUG="files", LD_DEBUG_OUTPUT=str(tmp_path / "ld"))
    for f in tmp_path.glob("ld.*"):
        f.unlink()
    result = compile_(tmp_path, out, *extra, env=env)
    text = "".join(f.read_text() for f in tmp_path.glob("ld.*"))
    return result, text


@pytest.fixture
def compiled(tmp_path):
    model(tmp_path)
    result = compile_(tmp_path, "first.tess")
    assert result.returncode == 0, result.stderr
    assert "cache miss" in result.stderr
    return tmp_path


def test_a_command_seen_before_is_a_lookup_without_the_compiler(compiled):
    tmp_path = compiled
    result, loaded = loaded_libraries(tmp_path, "again.tess")
    assert result.returncode == 0, result.stderr
    entries = list((tmp_path / "cache").glob("*.tess"))
    assert result.stderr == (f"tessera-compile: cache hit: {tmp_path / 'cache' / entries[0].name}"
                             f" -> {tmp_path / 'again.tess'}\n")
    # Neither MLIR nor LLVM's shared library was loaded: the front end did it.
    assert "libMLIR" not in loaded and "libLLVM" not in loaded, loaded
    assert (tmp_path / "again.tess").read_bytes() == (tmp_path / "first.tess").read_bytes()
    # The compiler, for comparison, loads them.
    result, loaded = loaded_libraries(tmp_path, "summary.tess", "--summary")
    assert result.returncode == 0, result.stderr
    assert "libMLIR" in loaded


@pytest.mark.parametrize("change", ["model", "option", "environment"])
def test_what_changes_the_command_goes_to_the_compiler(change, compiled):
    tmp_path = compiled
    extra, env = [], None
    if change == "model":
        model(tmp_path, seed=1)  # the same path, other weights
    elif change == "option":
        extra = ["--replicas", "2"]
    else:
        env = dict(os.environ, TESSERA_NO_STAGING="1")
    result, loaded = loaded_libraries(tmp_path, "other.tess", *extra, env=env)
    assert result.returncode == 0, result.stderr
    assert "libMLIR" in loaded  # the compiler ran
    if change == "environment":
        # Another command, the same executable: the compiler's own cache
        # finds it (a run-time variable changes no code).
        assert "cache hit" in result.stderr, result.stderr
    else:
        assert "cache miss" in result.stderr, result.stderr
        assert (tmp_path / "other.tess").read_bytes() != (tmp_path / "first.tess").read_bytes()
    # Recorded: the same command again is the front end's.
    result, loaded = loaded_libraries(tmp_path, "other.tess", *extra, env=env)
    assert "cache hit" in result.stderr and "libMLIR" not in loaded, result.stderr


def test_a_command_that_prints_more_than_the_hit_runs_the_compiler(compiled):
    tmp_path = compiled
    for _ in range(2):
        result = compile_(tmp_path, "s.tess", "--summary")
        assert result.returncode == 0, result.stderr
        assert "estimated on ipu2" in result.stdout, result.stdout


def test_a_damaged_entry_is_not_copied(compiled):
    tmp_path = compiled
    assert "cache hit" in compile_(tmp_path, "warm.tess").stderr
    entry = next((tmp_path / "cache").glob("*.tess"))
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    result = compile_(tmp_path, "again.tess")
    assert result.returncode == 0, result.stderr
    assert "is unusable" in result.stderr and "damaged" in result.stderr, result.stderr
    assert (tmp_path / "again.tess").read_bytes() == (tmp_path / "first.tess").read_bytes()
    # The compiler stored a good entry and recorded it again.
    result = compile_(tmp_path, "third.tess")
    assert result.stderr.startswith("tessera-compile: cache hit:"), result.stderr
    assert (tmp_path / "third.tess").read_bytes() == (tmp_path / "first.tess").read_bytes()


def test_records_are_trusted_as_entries_are(compiled):
    tmp_path = compiled
    records = list((tmp_path / "cache" / "commands").iterdir())
    assert len(records) == 1
    os.chmod(records[0], 0o666)
    result = compile_(tmp_path, "again.tess")
    assert result.returncode == 0, result.stderr
    # The front end did not use it; the compiler found the entry, and
    # wrote the record anew, owner-only.
    assert "cache hit" in result.stderr
    assert not os.stat(records[0]).st_mode & 0o022
    os.chmod(tmp_path / "cache" / "commands", 0o777)
    result = compile_(tmp_path, "again.tess")
    assert result.returncode == 1
    assert "refusing the cache at" in result.stderr and "commands" in result.stderr


def test_without_a_cache_or_an_output_it_is_the_compiler(tmp_path):
    model(tmp_path)
    result = run([tool("tessera-compile"), str(tmp_path / "mm.onnx"), *SMALL_TARGET,
                  "--summary", "-o", str(tmp_path / "m.tess")])
    assert result.returncode == 0 and "estimated on ipu2" in result.stdout, result.stderr
    result = run([tool("tessera-compile"), "--version"])
    assert result.returncode == 0 and "Tessera" in result.stdout
    result = run([tool("tessera-compile"), str(tmp_path / "missing.onnx"), "--cache-dir",
                  str(tmp_path / "cache"), "-o", str(tmp_path / "m.tess")])
    assert result.returncode == 1 and "missing.onnx" in result.stderr, result.stderr


def test_a_settled_model_is_found_by_its_stamp_and_a_changed_one_never(compiled):
    tmp_path = compiled
    records = tmp_path / "cache" / "commands"
    time.sleep(3.1)  # files changed in the last 3 seconds are not stamped
    result = compile_(tmp_path, "again.tess")  # found by contents, recorded by stamps
    assert result.stderr.startswith("tessera-compile: cache hit"), result.stderr
    assert len(list(records.iterdir())) == 2
    result, loaded = loaded_libraries(tmp_path, "again.tess")  # by stamps
    assert result.stderr.startswith("tessera-compile: cache hit") and "libMLIR" not in loaded
    assert len(list(records.iterdir())) == 2
    # Other weights, the same size and modification time: the change time
    # moves, the stamp misses, and the contents go to the compiler.
    stat = os.stat(tmp_path / "mm.onnx")
    model(tmp_path, seed=1)
    os.utime(tmp_path / "mm.onnx", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(tmp_path / "mm.onnx").st_size == stat.st_size
    result = compile_(tmp_path, "changed.tess")
    assert "cache miss" in result.stderr, result.stderr
    assert (tmp_path / "changed.tess").read_bytes() != (tmp_path / "first.tess").read_bytes()


def test_a_model_path_with_an_equals_sign_is_keyed_by_its_contents(tmp_path):
    sweep = tmp_path / "lr=0.1"
    sweep.mkdir()
    args = [tool("tessera-compile"), str(sweep / "mm.onnx"), *SMALL_TARGET,
            "--cache-dir", str(tmp_path / "cache")]
    model(sweep, seed=0)
    assert run(args + ["-o", str(tmp_path / "a.tess")]).returncode == 0
    assert run(args + ["-o", str(tmp_path / "a.tess")]).stderr.startswith(
        "tessera-compile: cache hit")
    model(sweep, seed=1)
    result = run(args + ["-o", str(tmp_path / "b.tess")])
    assert "cache miss" in result.stderr, result.stderr
    assert (tmp_path / "a.tess").read_bytes() != (tmp_path / "b.tess").read_bytes()


def test_a_model_from_a_pipe_is_never_answered_by_a_record(tmp_path):
    args = [tool("tessera-compile"), "/dev/stdin", *SMALL_TARGET,
            "--cache-dir", str(tmp_path / "cache")]
    outputs = []
    for seed in [0, 1, 0]:
        model(tmp_path, seed=seed)
        out = tmp_path / f"pipe{len(outputs)}.tess"
        result = subprocess.run(args + ["-o", str(out)], capture_output=True,
                                input=(tmp_path / "mm.onnx").read_bytes())
        assert result.returncode == 0, result.stderr.decode()
        outputs.append(out.read_bytes())
        assert "compiled without the cache" in result.stderr.decode()
    assert outputs[0] != outputs[1] and outputs[0] == outputs[2]
    assert not (tmp_path / "cache").exists()
